package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// ValidateNodeSizing checks spec.nodeSizing against the template: what the
// CRD's CEL rules check (fraction, min <= max) again, for clients that
// skip them, and what CEL cannot see: the container exists; a resource
// is cpu, memory or an extended resource; a limit is never below the
// request on any node; without a sized limit, the template's limit bounds
// requests.max; an extended resource is whole, with requests only.
func ValidateNodeSizing(rules []everynodev1alpha1.ContainerSizing, tmpl *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, c := range rules {
		cp := fldPath.Index(i)
		if seen[c.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		seen[c.Name] = true
		container := podContainer(&tmpl.Spec, c.Name)
		if container == nil {
			errs = append(errs, field.NotFound(cp.Child("name"), c.Name))
		}
		if len(c.Resources) == 0 {
			errs = append(errs, field.Required(cp.Child("resources"), "size at least one resource"))
		}
		seenRes := map[corev1.ResourceName]bool{}
		for j, r := range c.Resources {
			rp := cp.Child("resources").Index(j)
			if seenRes[r.Resource] {
				errs = append(errs, field.Duplicate(rp.Child("resource"), r.Resource))
			}
			seenRes[r.Resource] = true
			extended := isExtendedResource(r.Resource)
			if !IsResizable(r.Resource) && !extended {
				errs = append(errs, field.NotSupported(rp.Child("resource"), r.Resource, []string{"cpu", "memory", "an extended resource such as example.com/gpu"}))
				continue
			}
			errs = append(errs, validateShare(r.Requests, extended, rp.Child("requests"))...)
			if r.Limits != nil {
				if extended {
					errs = append(errs, field.Forbidden(rp.Child("limits"), "an extended resource's limit is its request: give requests only"))
					continue
				}
				errs = append(errs, validateShare(*r.Limits, false, rp.Child("limits"))...)
				errs = append(errs, limitsNotBelowRequests(r.Requests, *r.Limits, rp.Child("limits"))...)
				continue
			}
			if container == nil || extended {
				continue
			}
			if lim, ok := container.Resources.Limits[r.Resource]; ok {
				mp := rp.Child("requests", "max")
				switch {
				case r.Requests.Max == nil:
					errs = append(errs, field.Required(mp, fmt.Sprintf("the template's limit of %s is %s: without limits here, requests.max must keep the request within it", r.Resource, lim.String())))
				case r.Requests.Max.Cmp(lim) > 0:
					errs = append(errs, field.Invalid(mp, r.Requests.Max.String(), fmt.Sprintf("above the template's limit of %s (%s): give limits here too, or a lower max", r.Resource, lim.String())))
				}
			}
		}
	}
	return errs
}

// validateShare checks one share on its own.
func validateShare(s everynodev1alpha1.ResourceShare, whole bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := ParseFraction(s.Fraction); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("fraction"), s.Fraction, "must be a decimal greater than 0 and at most 1, such as \"0.05\""))
	}
	for _, b := range []struct {
		name string
		q    *resource.Quantity
	}{{"min", s.Min}, {"max", s.Max}} {
		if b.q == nil {
			continue
		}
		if b.q.Sign() < 0 {
			errs = append(errs, field.Invalid(fldPath.Child(b.name), b.q.String(), "must not be negative"))
		}
		if whole && b.q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(fldPath.Child(b.name), b.q.String(), "an extended resource comes in whole units"))
		}
	}
	if s.Min != nil && s.Max != nil && s.Min.Cmp(*s.Max) > 0 {
		errs = append(errs, field.Invalid(fldPath.Child("min"), s.Min.String(), fmt.Sprintf("must not be above max (%s)", s.Max.String())))
	}
	return errs
}

// limitsNotBelowRequests holds the limit at or above the request on every
// node: the share is a clamp of a rounded product, monotone in the
// fraction, the min and the max, so it is enough that the limit's are
// each at least the request's (an unset min is 0, an unset max unbounded).
func limitsNotBelowRequests(req, lim everynodev1alpha1.ResourceShare, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rf, err1 := ParseFraction(req.Fraction)
	lf, err2 := ParseFraction(lim.Fraction)
	if err1 == nil && err2 == nil && lf.Cmp(rf) < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("fraction"), lim.Fraction, fmt.Sprintf("below requests.fraction (%s): the limit would be below the request", req.Fraction)))
	}
	if req.Min != nil && (lim.Min == nil || lim.Min.Cmp(*req.Min) < 0) {
		errs = append(errs, field.Invalid(fldPath.Child("min"), quantityOrUnset(lim.Min), fmt.Sprintf("below requests.min (%s): on a small node the limit would be below the request", req.Min.String())))
	}
	if lim.Max != nil && (req.Max == nil || lim.Max.Cmp(*req.Max) < 0) {
		errs = append(errs, field.Invalid(fldPath.Child("max"), lim.Max.String(), fmt.Sprintf("below requests.max (%s): on a big node the limit would be below the request", quantityOrUnset(req.Max))))
	}
	return errs
}

func quantityOrUnset(q *resource.Quantity) string {
	if q == nil {
		return "unset"
	}
	return q.String()
}
