package extender

import (
	"bytes"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"everynode.io/everynode/extender/codec"
	"everynode.io/everynode/placement"
)

// request is a decoded filter or prioritize call and the kind of pod it is
// about.
type request struct {
	codec.Args
	// daemonPod is the pod (its metadata) when it is an everynode daemon
	// pod, else nil: nothing reads an ordinary pod.
	daemonPod *corev1.Pod
	// builtinDaemon is true for a pod of a built-in apps DaemonSet, which
	// no readiness gate holds back.
	builtinDaemon bool
}

func newRequest(args codec.Args) request {
	req := request{Args: args}
	switch {
	case args.Pod == nil:
	case placement.IsDaemonPod(args.Pod):
		req.daemonPod = args.Pod
	case placement.IsBuiltinDaemonPod(args.Pod):
		req.builtinDaemon = true
	}
	return req
}

// withRequest decodes the ExtenderArgs of a filter or prioritize call and
// calls use with it; a body that does not decode, or has no pod, is a bad
// request. The request is valid only until use returns.
func withRequest(body []byte, use func(request) error) error {
	decoded := false
	err := codec.ReadArgs(body, func(args codec.Args) error {
		decoded = true
		if !args.HasPod {
			return badRequest("ExtenderArgs has no Pod")
		}
		return use(newRequest(args))
	})
	if err != nil && !decoded {
		return badRequest("decode ExtenderArgs: %v", err)
	}
	return err
}

// serveFilter decodes ExtenderArgs, filters its candidates and writes the
// ExtenderFilterResult.
func (e *Extender) serveFilter(body []byte, out *bytes.Buffer) error {
	return withRequest(body, func(req request) error {
		return req.EncodeFilterResult(out, e.filterRequest(req))
	})
}

// filter answers decoded ExtenderArgs (tests call it directly).
func (e *Extender) filter(args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	return e.filterRequest(newRequest(codec.FromArgs(args)))
}

// filterRequest answers a decoded filter request. The answer always
// carries a non-nil NodeNames (or Nodes, for a scheduler configured without
// nodeCacheCapable), since nil there means "every node failed", and its
// NodeNames are a subsequence of the request's, as EncodeFilterResult
// needs.
func (e *Extender) filterRequest(req request) *extenderv1.ExtenderFilterResult {
	names, fromNodes := candidateNames(req)
	var (
		out filterOutcome
		err error
	)
	switch {
	case req.daemonPod != nil:
		out, err = filterDaemonPod(req.daemonPod, names, e.cluster)
	case req.builtinDaemon:
		// Node plumbing (kube-proxy, CNI agents) may be what a gated daemon
		// waits for to turn Ready: gating it could hold the node forever.
		out = filterOutcome{passed: names}
	case placement.StartupTaint() != "":
		// The startup taint gates the nodes (controller/startup.go): one
		// gate, so a node the controller released is released for every
		// scheduler, with or without this extender.
		out = filterOutcome{passed: names}
	default:
		out = filterGated(names, e.gate.gated())
	}
	if err != nil {
		// Only a broken cache gets here; with Error set the scheduler
		// skips this (ignorable) extender for the pod.
		return &extenderv1.ExtenderFilterResult{NodeNames: &[]string{}, Error: err.Error()}
	}
	if req.daemonPod != nil {
		daemonPassed.Add(float64(len(out.passed)))
		daemonFailed.Add(float64(len(out.failed)))
	} else {
		otherPassed.Add(float64(len(out.passed)))
		otherFailed.Add(float64(len(out.failed)))
	}
	result := &extenderv1.ExtenderFilterResult{
		FailedNodes:                out.failed,
		FailedAndUnresolvableNodes: out.failed,
	}
	if fromNodes {
		result.Nodes = keepNodes(req.Nodes, out.passed)
	} else {
		result.NodeNames = &out.passed
	}
	return result
}

// candidateNames returns the request's node names: NodeNames with
// nodeCacheCapable, else the names of Nodes (fromNodes true), else an empty
// list. The returned slice is never nil.
func candidateNames(req request) (names []string, fromNodes bool) {
	switch {
	case req.Names != nil && *req.Names != nil:
		return *req.Names, false
	case req.Names == nil && req.Nodes != nil:
		names = make([]string, len(req.Nodes.Items))
		for i := range req.Nodes.Items {
			names[i] = req.Nodes.Items[i].Name
		}
		return names, true
	default:
		return []string{}, false
	}
}

// keepNodes returns the items of nodes named in passed, which is a
// subsequence of the items' names in order.
func keepNodes(nodes *corev1.NodeList, passed []string) *corev1.NodeList {
	out := &corev1.NodeList{Items: make([]corev1.Node, 0, len(passed))}
	i := 0
	for _, node := range nodes.Items {
		if i < len(passed) && node.Name == passed[i] {
			out.Items = append(out.Items, node)
			i++
		}
	}
	return out
}

// servePrioritize decodes ExtenderArgs and writes the HostPriorityList.
func (e *Extender) servePrioritize(body []byte, out *bytes.Buffer) error {
	return withRequest(body, func(req request) error {
		if req.daemonPod == nil { // the common case, without a list to build
			out.WriteString("[]\n")
			return nil
		}
		names, _ := candidateNames(req)
		return encodeJSON(out, prioritize(req.daemonPod, names))
	})
}

// servePreempt decodes ExtenderPreemptionArgs and writes the narrowed
// victims. Preemption is rare, so encoding/json serves.
func (e *Extender) servePreempt(body []byte, out *bytes.Buffer) error {
	var args extenderv1.ExtenderPreemptionArgs
	if err := json.Unmarshal(body, &args); err != nil {
		return badRequest("decode ExtenderPreemptionArgs: %v", err)
	}
	if args.Pod == nil {
		return badRequest("ExtenderPreemptionArgs has no Pod")
	}
	return encodeJSON(out, preempt(&args))
}
