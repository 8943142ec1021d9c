package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/kubernetes"
)

// DefaultName is the cluster of `make cluster` and `make e2e`: the one
// whose files keep the documented paths (.e2e/kubeconfig, .e2e/logs).
const DefaultName = "everynode-e2e"

// Cluster is one local cluster of the harness: where its files are and
// which ports its everynode processes listen on. It holds no process
// handles: every component runs detached, known by a pid file, so one
// command starts the cluster and another, or a test, restarts a part.
type Cluster struct {
	// Name is kwokctl's name for the cluster.
	Name string
	// Root is the everynode checkout.
	Root string
	// State is the folder of the cluster's files: .e2e for the default
	// cluster, .e2e/<name> for another, so two run side by side.
	State string
	// Port and HealthPort are everynode's serving and health ports on
	// 127.0.0.1; replica n listens on Port+n and HealthPort+n.
	Port, HealthPort int
	// Namespace and Release are the chart's.
	Namespace, Release string
	// Log receives progress lines.
	Log io.Writer

	// kube is the admin client, made on first use (Client).
	kube kubernetes.Interface
}

// New describes the cluster name of the checkout root: the default one
// on ports 18443 and 18080, another on 28443 and 28080.
// EVERYNODE_PORT and EVERYNODE_HEALTH_PORT override them.
func New(root, name string) (*Cluster, error) {
	if name == "" {
		name = DefaultName
	}
	c := &Cluster{Name: name, Root: root, State: filepath.Join(root, ".e2e"), Port: 18443, HealthPort: 18080,
		Namespace: "everynode-system", Release: "everynode", Log: os.Stdout}
	if name != DefaultName {
		c.State = filepath.Join(c.State, name)
		c.Port, c.HealthPort = 28443, 28080
	}
	for env, p := range map[string]*int{"EVERYNODE_PORT": &c.Port, "EVERYNODE_HEALTH_PORT": &c.HealthPort} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: %w", env, v, err)
			}
			*p = n
		}
	}
	return c, os.MkdirAll(c.Logs(), 0o755)
}

// Bin is the folder of the tools e2e/hack/tools.sh builds.
func (c *Cluster) Bin() string { return filepath.Join(c.Root, ".e2e", "bin") }

// Tool is the path of one built tool.
func (c *Cluster) Tool(name string) string { return filepath.Join(c.Bin(), name) }

// KwokWorkdir is kwokctl's working folder, shared by every cluster of the
// checkout (KWOK_WORKDIR).
func (c *Cluster) KwokWorkdir() string { return filepath.Join(c.Root, ".e2e", "kwok") }

// KwokDir is kwokctl's folder of this cluster: its pids, logs and pki.
func (c *Cluster) KwokDir() string { return filepath.Join(c.KwokWorkdir(), "clusters", c.Name) }

// Kubeconfig is the admin kubeconfig the harness writes: never the
// caller's KUBECONFIG, so a real cluster is never touched.
func (c *Cluster) Kubeconfig() string {
	if v := os.Getenv("E2E_KUBECONFIG"); v != "" {
		return v
	}
	return filepath.Join(c.State, "kubeconfig")
}

// Logs is the folder of the host processes' logs.
func (c *Cluster) Logs() string { return filepath.Join(c.State, "logs") }

// PKI is the folder of the harness's certificates (pki.go).
func (c *Cluster) PKI() string { return filepath.Join(c.Root, ".e2e", "pki") }

// URL is where the API server and kube-scheduler reach everynode.
func (c *Cluster) URL() string { return fmt.Sprintf("https://127.0.0.1:%d", c.Port) }

// EverynodeLog is the log of everynode's first replica.
func (c *Cluster) EverynodeLog() string { return filepath.Join(c.Logs(), "everynode.log") }

func (c *Cluster) path(name string) string { return filepath.Join(c.State, name) }

func (c *Cluster) say(format string, args ...any) {
	fmt.Fprintf(c.Log, "\033[1m==> %s\033[0m\n", fmt.Sprintf(format, args...))
}

// CertMode is where everynode's serving certificate comes from.
type CertMode string

const (
	// CertExternalCA: the harness's own CA (pki.go), given as files.
	CertExternalCA CertMode = ""
	// CertSelfSigned: everynode's CA in the Secret <release>-ca, written
	// into the webhook configurations by everynode (the chart's default).
	CertSelfSigned CertMode = "self-signed"
	// CertManager: cert-manager issues it into the Secret <release>-tls.
	CertManager CertMode = "cert-manager"
)

// Settings are what a cluster was started with and the modes it was
// switched to since. They are kept in the cluster's folder, so a later
// command (a restart of everynode by a test, by the bench) starts
// everything as the first one did.
type Settings struct {
	// Nodes is how many kwok nodes up adds.
	Nodes int `json:"nodes"`
	// KCMControllers is kube-controller-manager's --controllers ("": all).
	KCMControllers string `json:"kcmControllers,omitempty"`
	// TakeoverKCMControllers is --controllers while everynode takes over
	// apps/v1 sets ("": all but the DaemonSet controller).
	TakeoverKCMControllers string `json:"takeoverKcmControllers,omitempty"`
	// EverynodeArgs are more flags of `everynode serve`.
	EverynodeArgs []string `json:"everynodeArgs,omitempty"`
	// HelmArgs are more arguments of every `helm upgrade --install`.
	HelmArgs []string `json:"helmArgs,omitempty"`
	// RealNode adds a kubelet node with containerd (node.go) beside the
	// kwok nodes, and installs the chart as a user does: everynode's image
	// in the chart's Deployment on that node, reached through its Service.
	RealNode bool `json:"realNode,omitempty"`

	// CertMode, ClientAuth and Takeover are the modes the scenarios
	// switch (CertMode, ClientAuth, Takeover methods).
	CertMode   CertMode `json:"certMode,omitempty"`
	ClientAuth bool     `json:"clientAuth,omitempty"`
	Takeover   bool     `json:"takeover,omitempty"`
}

func (c *Cluster) settingsFile() string { return c.path("cluster.json") }

// Settings reads the cluster's settings; a cluster never started has the
// zero Settings.
func (c *Cluster) Settings() (Settings, error) {
	var s Settings
	b, err := os.ReadFile(c.settingsFile())
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", c.settingsFile(), err)
	}
	return s, nil
}

// SaveSettings keeps s for later commands.
func (c *Cluster) SaveSettings(s Settings) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.settingsFile(), append(b, '\n'), 0o644)
}

// update changes the kept settings with fn.
func (c *Cluster) update(fn func(*Settings)) (Settings, error) {
	s, err := c.Settings()
	if err != nil {
		return s, err
	}
	fn(&s)
	return s, c.SaveSettings(s)
}
