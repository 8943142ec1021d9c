package admission

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Allowed admits the request, with optional warnings for the user.
func Allowed(warnings ...string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
}

// Denied refuses the request with a message that says why.
func Denied(code int32, reason metav1.StatusReason, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result:  &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg},
	}
}

// Forbidden refuses a request its user may not make (403).
func Forbidden(msg string) *admissionv1.AdmissionResponse {
	return Denied(http.StatusForbidden, metav1.StatusReasonForbidden, msg)
}

// Invalid refuses an invalid object (422) with one cause per field error,
// as the API server's own validation does, so kubectl prints every field
// path. warnings go along with the refusal. With no errors it admits.
func Invalid(gk schema.GroupKind, name string, errs field.ErrorList, warnings ...string) *admissionv1.AdmissionResponse {
	if len(errs) == 0 {
		return Allowed(warnings...)
	}
	status := apierrors.NewInvalid(gk, name, errs).ErrStatus
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &status, Warnings: warnings}
}

// Errored refuses a request the webhook could not decide: code 4xx for a
// request it cannot read, 5xx for its own failure.
func Errored(code int32, err error) *admissionv1.AdmissionResponse {
	reason := metav1.StatusReasonBadRequest
	if code >= http.StatusInternalServerError {
		reason = metav1.StatusReasonInternalError
	}
	return Denied(code, reason, err.Error())
}

// Patched admits the request with the JSONPatch that turns raw (the
// request's object as the API server sent it) into mutated. original is raw
// decoded and not modified; it serves to tell the webhook's changes from the
// artefacts of the typed round trip: fields this binary's types do not know
// (sent by a newer API server) and non-canonical spellings (a quantity
// "1000m" re-encoded as "1") would otherwise be patched away. Diffing against
// raw, not against a re-encoded original, keeps every patch path valid in
// the object the API server applies it to.
//
// A failure to encode or diff is our bug, not the user's: it refuses the
// request with a 500.
func Patched(raw []byte, original, mutated any, warnings ...string) *admissionv1.AdmissionResponse {
	resp, err := patched(raw, original, mutated, warnings)
	if err != nil {
		return Errored(http.StatusInternalServerError, err)
	}
	return resp
}

func patched(raw []byte, original, mutated any, warnings []string) (*admissionv1.AdmissionResponse, error) {
	// Nothing changed (the common case for pods: the controller creates
	// them already stamped), so the patch is empty: skip encoding the
	// object to find that out, the costliest step of a mutation that
	// changes nothing (BenchmarkMutatePod).
	if reflect.DeepEqual(original, mutated) {
		return Allowed(warnings...), nil
	}
	mutatedJSON, err := json.Marshal(mutated)
	if err != nil {
		return nil, fmt.Errorf("encode mutated object: %w", err)
	}
	ops, err := jsonpatch.CreatePatch(raw, mutatedJSON)
	if err != nil {
		return nil, fmt.Errorf("diff mutated object: %w", err)
	}
	if len(ops) > 0 {
		originalJSON, err := json.Marshal(original)
		if err != nil {
			return nil, fmt.Errorf("encode original object: %w", err)
		}
		artefacts, err := jsonpatch.CreatePatch(raw, originalJSON)
		if err != nil {
			return nil, fmt.Errorf("diff original object: %w", err)
		}
		ops = withoutOps(ops, artefacts)
	}
	resp := Allowed(warnings...)
	if len(ops) == 0 {
		return resp, nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encode JSONPatch: %w", err)
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	return resp, nil
}

// withoutOps returns ops less those that also appear in drop.
func withoutOps(ops, drop []jsonpatch.Operation) []jsonpatch.Operation {
	if len(drop) == 0 {
		return ops
	}
	byPath := make(map[string][]jsonpatch.Operation, len(drop))
	for _, op := range drop {
		byPath[op.Path] = append(byPath[op.Path], op)
	}
	kept := ops[:0]
	for _, op := range ops {
		if !containsOp(byPath[op.Path], op) {
			kept = append(kept, op)
		}
	}
	return kept
}

func containsOp(ops []jsonpatch.Operation, op jsonpatch.Operation) bool {
	for _, o := range ops {
		if o.Operation == op.Operation && reflect.DeepEqual(o.Value, op.Value) {
			return true
		}
	}
	return false
}
