// Command everynode serves everynode's admission webhooks and scheduler
// extender on one HTTPS server and runs its DaemonSet controller under leader
// election. See `everynode --help`.
package main

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/klog/v2"
)

func main() {
	err := newRootCommand().Execute()
	klog.Flush()
	if err == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "everynode: %v\n", err)
	var usage usageError
	if errors.As(err, &usage) {
		// Bad flags: the conventional exit code of a misused command, so a
		// wrapper or a crash-looping pod shows it is the configuration.
		os.Exit(2)
	}
	os.Exit(1)
}
