// Command coredns is CoreDNS with only the plugins the real node's cluster
// DNS uses (kubernetes, errors, health, ready, cache, loadbalance, log):
// no forwarding, so a name outside the cluster gets no answer and no
// query leaves the machine.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // the server's own registrations
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	// The order in which plugins see a query, as upstream's plugin.cfg.
	dnsserver.Directives = []string{"log", "errors", "health", "ready", "cache", "loadbalance", "kubernetes"}
	coremain.Run()
}
