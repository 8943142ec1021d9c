package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func TestIsFencedWrite(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/api/v1/namespaces/a/pods", true},
		{"DELETE", "/api/v1/namespaces/a/pods/p", true},
		{"PATCH", "/api/v1/namespaces/a/pods/p/status", true},
		{"POST", "/api/v1/namespaces/a/pods/p/eviction", true},
		{"PATCH", "/prefix/api/v1/namespaces/a/pods/p/resize", true},
		{"PUT", "/api/v1/nodes/n", true},
		{"PUT", "/apis/everynode.io/v1alpha1/namespaces/a/daemonsets/d/status", true},
		{"PATCH", "/apis/apps/v1/namespaces/a/daemonsets/d/status", true},
		{"POST", "/apis/apps/v1/namespaces/a/controllerrevisions", true},
		{"DELETE", "/apis/apps/v1/namespaces/a/controllerrevisions/r", true},
		{"GET", "/api/v1/namespaces/a/pods/p", false},
		{"GET", "/api/v1/pods?watch=true", false},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/a/leases/l", false},
		{"POST", "/api/v1/namespaces/a/events", false},
		{"PATCH", "/apis/events.k8s.io/v1/namespaces/a/events/e", false},
		{"POST", "/apis/apps/v1/namespaces/a/daemonsets", false},
		{"DELETE", "/apis/apps/v1/namespaces/a/daemonsets/everynode-takeover-probe", false},
		{"POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", false},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if got := isFencedWrite(req); got != tc.want {
			t.Errorf("isFencedWrite(%s %s) = %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}

// A leader that wakes mid-batch, after the batch asked its fence, must
// not send the batch's next pod write: the controller's client asks the
// fence again for each one. The other clients (reads, the Lease, events)
// are not fenced.
func TestControllerClientFencesEachPodWrite(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"a"}}`))
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := defaultServeOptions()
	o.kubeconfig = kubeconfig
	c, err := newClients(o)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	c.writeFence.set(func() error {
		if stopped {
			return errors.New("last renewed the leader Lease 36s ago")
		}
		return nil
	})
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a"}}
	pods := c.controllerKube.CoreV1().Pods("a")
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the first create, fence open: %v", err)
	}
	stopped = true // the process slept past its Lease between two requests
	_, err = pods.Create(ctx, pod, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "refused by the write fence") {
		t.Errorf("the second create, fence closed: %v; want refused", err)
	}
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{}); err == nil {
		t.Error("a delete went out with the fence closed")
	}
	// The set's status from a view a lease old, on the other clientset.
	set := &everynodev1alpha1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "a"}}
	if _, err := c.controllerEverynode.EverynodeV1alpha1().DaemonSets("a").UpdateStatus(ctx, set, metav1.UpdateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "refused by the write fence") {
		t.Errorf("a set status write with the fence closed: %v; want refused", err)
	}
	if _, err := pods.Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Errorf("a read with the fence closed: %v; want it sent", err)
	}
	if _, err := c.kube.CoreV1().Pods("a").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Errorf("a create on the unfenced client: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"POST /api/v1/namespaces/a/pods", "GET /api/v1/namespaces/a/pods/p", "POST /api/v1/namespaces/a/pods"}
	if strings.Join(seen, ", ") != strings.Join(want, ", ") {
		t.Errorf("the server saw %v, want %v", seen, want)
	}
}
