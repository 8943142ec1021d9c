// Command pause is the real node's sandbox image (e2e/cluster): it holds a
// pod's namespaces and does nothing else, as registry.k8s.io/pause does,
// which this machine cannot pull. It exits on SIGINT or SIGTERM and reaps
// any child handed to it as PID 1.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
