package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// fieldManager is the default --field-manager of the commands that write,
// like kubectl's "kubectl-rollout".
const fieldManager = "kubectl-everynode-rollout"

// The patches are JSON merge patches: a custom resource takes no strategic
// merge patch, and a merge patch that names only the fields it sets leaves
// the rest of the set (and anyone else's concurrent changes) alone.

// restartPatch returns the patch that stamps the pod template with
// kubectl's restartedAt annotation, so the controller rolls every pod
// without any other change. Like kubectl, it refuses a paused set (the new
// template would not roll out) and a restart within the same second (the
// patch would change nothing).
func restartPatch(ds *everynodev1alpha1.DaemonSet, now time.Time) ([]byte, error) {
	if placement.UpdateStrategy(ds).Paused {
		return nil, errors.New("can't restart a paused daemon set (run rollout resume first)")
	}
	stamp := now.Format(time.RFC3339)
	if ds.Spec.Template.Annotations[everynodev1alpha1.AnnotationRestartedAt] == stamp {
		return nil, errors.New("restart has already been triggered within the past second, please wait before attempting to trigger another")
	}
	return json.Marshal(map[string]any{
		"spec": map[string]any{
			"template": map[string]any{
				"metadata": map[string]any{
					"annotations": map[string]string{everynodev1alpha1.AnnotationRestartedAt: stamp},
				},
			},
		},
	})
}

// pausePatch returns the patch that sets (pause) or clears (resume)
// spec.updateStrategy.rollingUpdate.paused, and on resume lets a rollout
// that paused itself for failing pods go on; nil when the set is already
// in that state. An OnDelete set has no rolling update to pause: an error,
// rather than a field the controller would ignore.
func pausePatch(ds *everynodev1alpha1.DaemonSet, pause bool) ([]byte, error) {
	strategy := placement.UpdateStrategy(ds)
	if pause && !strategy.RollingUpdate() {
		return nil, fmt.Errorf("can't pause: its updateStrategy is %s, which replaces a pod only when you delete it; pause applies to %s", strategy.Type, appsv1.RollingUpdateDaemonSetStrategyType)
	}
	// A rollout that paused itself for failing pods (rollingUpdate.onFailure)
	// is resumed by naming its revision in an annotation: the user's
	// decision to let that revision roll out despite them.
	failed := ""
	if f := ds.Status.RolloutFailure; !pause && f != nil && f.Action == everynodev1alpha1.RolloutFailurePause &&
		f.Revision == ds.Status.UpdateRevision && ds.Annotations[everynodev1alpha1.AnnotationResumeRevision] != f.Revision {
		failed = f.Revision
	}
	if strategy.Paused == pause && failed == "" {
		return nil, nil
	}
	patch := map[string]any{}
	if strategy.Paused != pause {
		// null removes the field: resumed is the default, not an explicit false.
		var paused any
		if pause {
			paused = true
		}
		patch["spec"] = map[string]any{
			"updateStrategy": map[string]any{
				"rollingUpdate": map[string]any{"paused": paused},
			},
		}
	}
	if failed != "" {
		patch["metadata"] = map[string]any{
			"annotations": map[string]string{everynodev1alpha1.AnnotationResumeRevision: failed},
		}
	}
	return json.Marshal(patch)
}
