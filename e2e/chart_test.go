package e2e

import (
	"bytes"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The chart as a real API server sees it (issue 30): every variant a user
// can pick, rendered by helm and applied with a server-side dry run, so
// the API server's own validation (schemas, RBAC rules, webhook
// configurations, the admission policy, PodDisruptionBudget, cert-manager
// objects, NetworkPolicy) accepts every object. Nothing is stored. No
// container runtime here can run the Deployment itself; the harness runs
// everynode on the host instead (package cluster).
func TestChartServerSideDryRun(t *testing.T) {
	const release = "dryrun"
	ns := newNamespace(t)
	installCertManagerCRDs(t)

	ca, err := os.ReadFile(filepath.Join(harness.PKI(), "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	caBundle := base64.StdEncoding.EncodeToString(ca)
	variants := map[string][]string{
		"default: self-signed, 2 replicas, PDB": nil,
		"one replica, no PDB":                   {"--set", "replicaCount=1"},
		"cert-manager":                          {"--set", "certManager.enabled=true"},
		"own Secret and CA bundle":              {"--set", "tls.existingSecret=my-tls", "--set", "tls.caBundle=" + caBundle},
		"second scheduler":                      {"--set", "scheduler.enabled=true"},
		"more namespaces the webhooks skip":     {"--set", "webhooks.excludeNamespaces={infra}"},
		"NetworkPolicy": {"--set", "networkPolicy.enabled=true",
			"--set-json", `networkPolicy.https.from=[{"ipBlock":{"cidr":"10.0.0.0/8"}}]`,
			"--set-json", `networkPolicy.metrics.from=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`},
		"client certificates, second scheduler": {"-f", filepath.Join(repoRoot, "charts", "everynode", "ci", "clientauth-values.yaml")},
		"everything on":                         {"--set", "certManager.enabled=true", "--set", "scheduler.enabled=true", "--set", "networkPolicy.enabled=true", "--set", "replicaCount=3"},
	}
	for name, args := range variants {
		t.Run(name, func(t *testing.T) {
			manifest := helmTemplate(t, release, ns, args...)
			kinds := map[string]int{}
			for _, line := range strings.Split(manifest, "\n") {
				if k, ok := strings.CutPrefix(line, "kind: "); ok {
					kinds[k]++
				}
			}
			// No -n: every namespaced object names its namespace (the
			// second scheduler's RoleBinding is in kube-system).
			out, err := kubectl(t, manifest, "apply", "--server-side", "--dry-run=server", "--field-manager=e2e-dryrun", "-f", "-")
			if err != nil {
				t.Fatalf("the API server refused the chart (%v):\n%s", err, out)
			}
			applied := strings.Count(out, "serverside-applied (server dry run)")
			total := 0
			for _, n := range kinds {
				total += n
			}
			if applied != total || applied == 0 {
				t.Errorf("%d objects accepted by the dry run, %d rendered (%v):\n%s", applied, total, kinds, out)
			}
			t.Logf("%d objects accepted: %v", applied, kinds)
		})
	}
}

// helmTemplate renders the chart as `helm install` would in namespace ns.
func helmTemplate(t *testing.T, release, ns string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, ".e2e", "bin", "helm"),
		append([]string{"template", release, filepath.Join(repoRoot, "charts", "everynode"), "--namespace", ns}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// kubectl runs kubectl against the e2e cluster with stdin.
func kubectl(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx(t), filepath.Join(repoRoot, ".e2e", "bin", "kubectl"), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// installCertManagerCRDs applies cert-manager's CRDs from the module the
// harness builds cert-manager from (package cluster does the same when
// it starts cert-manager), so the cert-manager variant's Certificate and
// Issuer have a schema to be checked against.
func installCertManagerCRDs(t *testing.T) {
	t.Helper()
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager")
	list.Dir = filepath.Join(repoRoot, "e2e", "tools", "certmanager")
	dir, err := list.Output()
	if err != nil {
		t.Fatalf("find cert-manager's module: %v", err)
	}
	crds := filepath.Join(strings.TrimSpace(string(dir)), "deploy", "crds")
	if out, err := kubectl(t, "", "apply", "--server-side", "-f", crds); err != nil {
		t.Fatalf("apply cert-manager CRDs: %v\n%s", err, out)
	}
	eventually(t, time.Minute, "the cert-manager CRDs to be served", func() (bool, string, error) {
		out, err := kubectl(t, "", "get", "crd", "certificates.cert-manager.io", "-o", "jsonpath={.status.conditions[?(@.type=='Established')].status}")
		return err == nil && out == "True", out, nil
	})
}
