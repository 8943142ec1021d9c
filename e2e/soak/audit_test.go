package soak

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const everynodeSA = "system:serviceaccount:everynode-system:everynode"

// auditLine is one event as kube-apiserver writes it.
func auditLine(at, verb, ua, user, resource, group, ns, name string, code int, extra string) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","verb":"` + verb +
		`","requestURI":"/x` + map[bool]string{true: "?dryRun=All", false: ""}[strings.Contains(extra, "dry")] +
		`","user":{"username":"` + user + `"},"userAgent":"` + ua + `","objectRef":{"resource":"` + resource + `","apiGroup":"` + group +
		`","namespace":"` + ns + `","name":"` + name + `"},"responseStatus":{"metadata":{},"code":` + strconv.Itoa(code) +
		strings.TrimPrefix(extra, "dry") + `},"requestReceivedTimestamp":"` + at + `"}`
}

const (
	gcUA   = "kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc/generic-garbage-collector"
	soakUA = UserAgent + "/v0"
)

func TestCheckAudit(t *testing.T) {
	at := "2026-12-07T12:00:00.000000Z"
	refused := `,"message":"admission webhook \"pod.validate.everynode.io\" denied the request"`
	lines := []string{
		// Invariant 3.
		auditLine(at, "create", soakUA, "admin", "pods", "", PlainNamespace, "plain-1", 201, ""),
		auditLine(at, "create", soakUA, "admin", "pods", "", PlainNamespace, "", 403, "dry"+refused),
		auditLine(at, "create", soakUA, "admin", "pods", "", PlainNamespace, "plain-2", 500, `,"message":"etcdserver: request timed out"`),
		auditLine(at, "create", "everynode/v1", everynodeSA, "pods", "", SetNamespace, "s00-mu1-abcde", 201, ""),
		// Invariant 5: the soak deletes s01 with cascade, s02 orphaning.
		strings.Replace(auditLine(at, "delete", soakUA, "admin", "daemonsets", "everynode.io", SetNamespace, "s01-mu10pct", 200, ""),
			`"requestReceivedTimestamp"`, `"requestObject":{"kind":"DeleteOptions","propagationPolicy":"Background"},"requestReceivedTimestamp"`, 1),
		strings.Replace(auditLine(at, "delete", soakUA, "admin", "daemonsets", "everynode.io", SetNamespace, "s02-surge1", 200, ""),
			`"requestReceivedTimestamp"`, `"requestObject":{"kind":"DeleteOptions","propagationPolicy":"Orphan"},"requestReceivedTimestamp"`, 1),
		auditLine(at, "delete", gcUA, "admin", "pods", "", SetNamespace, "s01-mu10pct-xyz12", 200, ""),
		auditLine(at, "delete", gcUA, "admin", "controllerrevisions", "apps", SetNamespace, "s01-mu10pct-6b8f5", 200, ""),
		auditLine(at, "delete", gcUA, "admin", "pods", "", SetNamespace, "s02-surge1-qwert", 200, ""),
		auditLine(at, "delete", "everynode/v1", everynodeSA, "controllerrevisions", "apps", SetNamespace, "s03-surge20pct-111", 200, ""),
		auditLine(at, "delete", "everynode/v1", everynodeSA, "pods", "", SetNamespace, "s03-surge20pct-abc", 200, ""),
		auditLine(at, "delete", "kwok-controller/v0.8.0", "admin", "pods", "", SetNamespace, "s03-surge20pct-abc", 200, ""),
		auditLine(at, "delete", "kubectl/v1.37.2", "admin", "daemonsets", "apps", SetNamespace, "s16-apps", 200, ""),
		auditLine(at, "delete", "kubectl/v1.37.2", "admin", "pods", "", SetNamespace, "s16-apps-zzz", 200, ""),
		// A delete refused is nothing lost.
		auditLine(at, "delete", "kubectl/v1.37.2", "admin", "controllerrevisions", "apps", SetNamespace, "s05-partition-1", 404, ""),
		`{"kind":"Event","stage":"ResponseComplete","verb":"create","objectRef":{"resource":"po`, // cut short
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "audit.log")
	rotated := filepath.Join(dir, "audit-2026-12-07T11-59-00.000.log")
	if err := os.WriteFile(rotated, []byte(strings.Join(lines[:4], "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, []byte(strings.Join(lines[4:], "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	files := AuditFiles(log)
	if !reflect.DeepEqual(files, []string{rotated, log}) {
		t.Fatalf("AuditFiles = %v", files)
	}
	events, err := ReadAuditFiles(files, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(lines)-1 {
		t.Fatalf("%d events read, want %d", len(events), len(lines)-1)
	}
	vs, sum := CheckAudit(events, everynodeSA)
	var got []string
	for _, v := range vs {
		got = append(got, string(v.Invariant)+" "+strings.Join(v.Objects, ","))
	}
	want := []string{
		"admission-refused pod soak-plain/",
		"lost-pod pod s02-surge1-qwert",
		"lost-set apps daemonset s16-apps",
		"lost-pod pod s16-apps-zzz",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if sum.PodCreates["ordinary"] != 1 || sum.PodCreates["ordinary refused"] != 2 || sum.PodCreates["daemon pods by everynode"] != 1 {
		t.Errorf("pod creates %v", sum.PodCreates)
	}
	if sum.Deletes["garbage-collector pods"] != 2 || sum.Deletes["everynode controllerrevisions"] != 1 {
		t.Errorf("deletes %v", sum.Deletes)
	}
}

// The policy is valid YAML with the soak's namespaces and everynode's user.
func TestAuditPolicy(t *testing.T) {
	var p struct {
		Rules []struct {
			Level      string   `json:"level"`
			Namespaces []string `json:"namespaces"`
			Users      []string `json:"users"`
		} `json:"rules"`
	}
	if err := yaml.Unmarshal([]byte(AuditPolicy(everynodeSA)), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Rules) != 4 || p.Rules[3].Level != "None" || p.Rules[2].Users[0] != everynodeSA || p.Rules[1].Namespaces[1] != PlainNamespace {
		t.Errorf("rules %+v", p.Rules)
	}
}
