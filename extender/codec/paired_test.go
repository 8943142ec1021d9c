package codec

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

var pairedIters = flag.Int("paired", 0, "iterations of TestPaired")

// TestPaired alternates decoders op by op and reports each one's median
// op time and the per-pair ratio's median.
func TestPaired(t *testing.T) {
	if *pairedIters == 0 {
		t.Skip("-paired not set")
	}
	n := 5000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%05d", i)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1.2.3"}}},
	}
	body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
	vs := []string{"codec", "jsontext", "jsontext-peek", "jsontext-split", "encoding-json"}
	decs := map[string]func([]byte) (Args, error){"encoding-json": func(b []byte) (Args, error) {
		var args extenderv1.ExtenderArgs
		return Args{}, json.Unmarshal(b, &args)
	}}
	for k, v := range decoders {
		decs[k] = v
	}
	times := make([][]float64, len(vs))
	ratios := make([][]float64, len(vs))
	for it := 0; it < *pairedIters; it++ {
		var per [8]float64
		for k, v := range vs {
			dec := decs[v]
			start := time.Now()
			a, err := dec(body)
			d := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			a.release()
			per[k] = float64(d.Nanoseconds())
			times[k] = append(times[k], per[k])
		}
		for k := range vs {
			ratios[k] = append(ratios[k], per[k]/per[0])
		}
	}
	q := func(xs []float64, p float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))]
	}
	for k, v := range vs {
		t.Logf("%-15s median %7.0f ns (p25 %7.0f, p75 %7.0f, min %7.0f)  ratio to codec: median %.3f (p25 %.3f, p75 %.3f)",
			v, q(times[k], .5), q(times[k], .25), q(times[k], .75), q(times[k], 0), q(ratios[k], .5), q(ratios[k], .25), q(ratios[k], .75))
	}
}
