package pacing

import "time"

const (
	// InitialBatchSize is the first create batch of a set at rest; batches
	// double after each one that fully succeeds (upstream's
	// SlowStartInitialBatchSize).
	InitialBatchSize = 1

	// SlowStartMemory bounds how long a set's slow start is remembered
	// without a successful create, for a set that never comes to rest (a
	// node that stays NotReady): a join an hour later starts at one. It is
	// well above the create cycle of a rolling update (delete a step's
	// pods, wait for them to go, create their replacements).
	SlowStartMemory = time.Minute
)

// Batches returns the sizes of the create batches for n pods: initial,
// twice that, and so on, then whatever is left. A batch is sent only when
// every create of the previous one succeeded, so a set that cannot create
// pods at all (quota, a webhook that rejects them) costs one request per
// sync instead of hundreds, and one event instead of a storm.
func Batches(n, initial int) []int {
	var out []int
	for size, pos := min(n, initial), 0; pos < n; size, pos = min(2*size, n-(pos+size)), pos+size {
		out = append(out, size)
	}
	return out
}

// slowStart is where a set's slow start had got to when its last sync's
// creates all succeeded, and when.
//
// Upstream restarts its slow start at one pod in every sync. everynode's
// creates each pass an admission webhook, so each batch costs a webhook
// round trip, and a rollout or a rolling update paid for six or more of
// them in sequence although the set's creates had just been succeeding.
// Carrying the slow start over keeps the protection (the first failure
// sends the set back to one) and bounds a flood to one batch of at most
// twice what last succeeded.
//
// Twice, not the same again: a sync of 250 creates starts 1, 2, ..., 64
// and ends with the 123 left, so starting the next one at the largest
// batch would split every later sync in two, and each split is one more
// wait for the slowest create of a batch.
//
// Rest, not time, ends the memory: a set that is at rest (every node that
// should run it has an available pod of the update revision) starts its
// next creates (a node joining, the next update) at one pod again, as
// upstream's every sync does, because by then what made its creates
// succeed (quota, webhooks, the API server's load) may have changed; and
// the pods of a join then reach the scheduler and the kubelets spread out
// as upstream's do. SlowStartMemory is only the backstop.
type slowStart struct {
	size int
	at   time.Time
}

// current is the remembered batch size at now, 0 if none or expired.
func (s slowStart) current(now time.Time) int {
	if s.size == 0 || now.Sub(s.at) > SlowStartMemory {
		return 0
	}
	return s.size
}
