package webhook

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"everynode.io/everynode/webhook/admission"
)

var dryRunsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "everynode",
	Subsystem: "webhook",
	Name:      "template_dry_runs_total",
	Help:      "Pod template dry-run validations by outcome (valid, invalid, refused, unavailable). Unavailable means the static fallback was used.",
}, []string{"outcome"})

// RegisterMetrics registers the webhooks' metrics, the transport's
// included, with r. Registering twice with the same registry is harmless.
func RegisterMetrics(r prometheus.Registerer) {
	admission.RegisterMetrics(r)
	if err := r.Register(dryRunsTotal); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			panic(err)
		}
	}
}
