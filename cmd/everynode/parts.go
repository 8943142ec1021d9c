package main

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	kubeinformers "k8s.io/client-go/informers"

	everynodeinformers "everynode.io/everynode/client/informers/externalversions"
	"everynode.io/everynode/server"
)

// partsConfig is what the webhook, extender and controller are built from.
type partsConfig struct {
	opts        *serveOptions
	clients     *clients
	registry    *prometheus.Registry
	kubeFactory kubeinformers.SharedInformerFactory
	podFactory  kubeinformers.SharedInformerFactory
	setFactory  everynodeinformers.SharedInformerFactory
}

// parts are the built webhook and extender routes and the controller.
type parts struct {
	routes     server.Routes
	controller controllerRunner
	synced     func() error
}

// buildParts wires every part to the shared informers. Informers must be
// requested here, before the factories start.
func buildParts(cfg partsConfig) (*parts, error) {
	nodes := cfg.kubeFactory.Core().V1().Nodes().Informer()
	pods := cfg.podFactory.Core().V1().Pods().Informer()
	sets := cfg.setFactory.Everynode().V1alpha1().DaemonSets().Informer()
	p := &parts{
		synced: func() error {
			if !nodes.HasSynced() || !pods.HasSynced() || !sets.HasSynced() {
				return errors.New("informer caches not synced yet")
			}
			return nil
		},
	}
	return p, nil
}
