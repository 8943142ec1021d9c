// Package admission is the one AdmissionReview transport behind every
// everynode webhook route. It owns everything that is the same for all
// routes, so each route's handler only decides: the HTTP method and content
// type, the body size cap (7 MiB, answered with 413), decoding and checking
// the review (admission.k8s.io/v1 only, a request must be present, the
// object must be of the kind the route admits), the uid echo, recovering a
// panicking handler into an error response, metrics, and the helpers that
// build responses, including JSONPatch computed by diffing the original raw
// object against the mutated one.
//
// It follows controller-runtime's pkg/webhook/admission without its weight:
// no scheme, no decoder registry, no manager.
package admission
