package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Processes on this host: each starts detached (its own session, output
// to a log, no stdin), so it outlives the command that started it, and is
// known by a pid file.

// startDetached starts argv in dir with its output appended to log and
// returns its pid.
func startDetached(dir, log string, argv []string) (int, error) {
	return startDetachedEnv(dir, log, argv, nil)
}

// startDetachedEnv is startDetached with env as the environment (nil: this
// process's).
func startDetachedEnv(dir, log string, argv, env []string) (int, error) {
	out, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.Env = dir, out, out, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", argv[0], err)
	}
	// Reaped when it exits, so it does not stay a zombie of a long-lived
	// caller (a test binary) that alive would take for running. A caller
	// that exits first leaves it to init.
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// readPID reads a pid file; 0 when there is none.
func readPID(file string) (int, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("pid file %s: %w", file, err)
	}
	return pid, nil
}

// writePID writes a pid with no newline: kwokctl reads its pid files with
// strconv.Atoi and, given a newline, takes the component for stopped (and
// `kwokctl delete cluster` would leave it running).
func writePID(file string, pid int) error {
	return os.WriteFile(file, []byte(strconv.Itoa(pid)), 0o644)
}

// alive reports whether pid runs: it exists and is not a zombie, which
// has exited but waits for its parent to reap it.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may itself
	// hold spaces or parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// stop sends SIGTERM (a graceful shutdown, which releases everynode's
// Lease), then SIGKILL after grace, and waits until the process is gone.
// A process already gone is not an error.
func stop(pid int, grace time.Duration) {
	if pid <= 0 || syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	deadline := time.Now().Add(grace)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 50 && alive(pid); i++ {
		time.Sleep(100 * time.Millisecond)
	}
}

// stopPIDFile stops the process of a pid file and removes the file.
func stopPIDFile(file string) error {
	pid, err := readPID(file)
	if err != nil {
		return err
	}
	stop(pid, 15*time.Second)
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Component is one of the control plane's processes kwokctl started.
type Component string

const (
	Etcd                  Component = "etcd"
	KubeAPIServer         Component = "kube-apiserver"
	KubeScheduler         Component = "kube-scheduler"
	KubeControllerManager Component = "kube-controller-manager"
)

// restartComponent stops one of kwokctl's components, waits pause, and
// starts it again with the same command line, with each --flag=value of
// flags in place of the component's own --flag=, or added. kwokctl's
// binary runtime has no command for one component, so the command line
// and working folder are read from /proc.
//
// It returns the command line it started, which callers read flags from
// rather than /proc: once, in make check, /proc of the new process showed
// no --secure-port although the process had it.
func (c *Cluster) restartComponent(name Component, pause time.Duration, flags ...string) ([]string, error) {
	pidFile := filepath.Join(c.KwokDir(), "pids", string(name)+".pid")
	pid, err := readPID(pidFile)
	if err != nil || pid == 0 {
		return nil, fmt.Errorf("%s is not running (pid file %s): %v", name, pidFile, err)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, fmt.Errorf("command line of %s: %w", name, err)
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return nil, fmt.Errorf("working folder of %s: %w", name, err)
	}
	argv := withFlags(strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00"), flags)
	if argv[0] == "" {
		return nil, fmt.Errorf("%s (pid %d) has an empty command line: it is exiting", name, pid)
	}
	stop(pid, 30*time.Second)
	time.Sleep(pause)
	pid, err = startDetached(cwd, filepath.Join(c.KwokDir(), "logs", string(name)+".log"), argv)
	if err != nil {
		return nil, err
	}
	return argv, writePID(pidFile, pid)
}

// withFlags returns argv with each --flag=value of flags in place of any
// --flag= it has, or added at the end.
func withFlags(argv, flags []string) []string {
	out := append([]string(nil), argv...)
	for _, f := range flags {
		name, _, _ := strings.Cut(f, "=")
		kept := out[:0:0]
		for _, a := range out {
			if !strings.HasPrefix(a, name+"=") {
				kept = append(kept, a)
			}
		}
		out = append(kept, f)
	}
	return out
}

// flagValue is the value of --name= in argv, "" when it has none.
func flagValue(argv []string, name string) string {
	for _, a := range argv {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// run runs a tool to its end, its output to the cluster's log writer
// unless quiet, and says what failed with the tool's own words.
func (c *Cluster) run(ctx context.Context, quiet bool, argv ...string) error {
	cmd := c.command(ctx, argv)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if !quiet {
		cmd.Stdout, cmd.Stderr = c.Log, c.Log
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, buf.String())
	}
	return nil
}

// command is a tool run against this cluster: kwokctl's working folder
// and the admin kubeconfig in its environment.
func (c *Cluster) command(ctx context.Context, argv []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.KwokWorkdir(), "KUBECONFIG="+c.Kubeconfig())
	return cmd
}

// output runs a tool to its end and returns what it printed.
func (c *Cluster) output(ctx context.Context, argv ...string) (string, error) {
	cmd := c.command(ctx, argv)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return string(out), nil
}

// poll calls cond every interval until it says done, for at most timeout;
// a dot every 5 s says a long wait is not stuck.
func (c *Cluster) poll(ctx context.Context, what string, interval, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	start, dots := time.Now(), 0
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		if n := int(time.Since(start) / (5 * time.Second)); n > dots {
			dots = n
			fmt.Fprint(c.Log, ".")
		}
		return cond(ctx)
	})
	if dots > 0 {
		fmt.Fprintln(c.Log)
	}
	if err != nil {
		return fmt.Errorf("waiting %s for %s: %w", timeout, what, err)
	}
	return nil
}
