package plan

import (
	corev1 "k8s.io/api/core/v1"
)

// NodeSnapshot is the cluster's nodes as a sync reads them: the lister's
// list and each node's place in it by name. It is shared by every sync of
// every set until a node changes, so never modify it.
type NodeSnapshot struct {
	nodes  []*corev1.Node
	byName map[string]int32
}

// NewNodeSnapshot places each of nodes by name.
func NewNodeSnapshot(nodes []*corev1.Node) *NodeSnapshot {
	s := &NodeSnapshot{nodes: nodes, byName: make(map[string]int32, len(nodes))}
	for i, n := range nodes {
		s.byName[n.Name] = int32(i)
	}
	return s
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return node.Status.Conditions[i].Status == corev1.ConditionTrue
		}
	}
	return false
}

// Len is how many nodes the snapshot holds.
func (s *NodeSnapshot) Len() int { return len(s.nodes) }

// Node returns the node named name, if the snapshot holds it.
func (s *NodeSnapshot) Node(name string) (*corev1.Node, bool) {
	i, ok := s.byName[name]
	if !ok {
		return nil, false
	}
	return s.nodes[i], true
}
