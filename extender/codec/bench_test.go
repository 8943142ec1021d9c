package codec

import (
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// BenchmarkDecodeArgs decodes what kube-scheduler sends for an ordinary
// pod with n candidate nodes, by this codec and by encoding/json (the
// reason the codec exists) and, with GOEXPERIMENT=jsonv2, by jsontext
// (jsontext_test.go).
func BenchmarkDecodeArgs(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("node-%05d", i)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1.2.3"}}},
		}
		body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"codec", "jsontext"} {
			decode, ok := decoders[name]
			if !ok {
				continue // jsontext needs GOEXPERIMENT=jsonv2
			}
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					args, err := decode(body)
					if err != nil {
						b.Fatal(err)
					}
					args.release()
				}
			})
		}
		b.Run(fmt.Sprintf("encoding-json/%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var args extenderv1.ExtenderArgs
				if err := json.Unmarshal(body, &args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
