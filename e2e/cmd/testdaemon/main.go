// Command testdaemon is the daemon the real-node scenarios run
// (e2e/cluster builds its images, tagged v1 and v2): it serves /healthz and
// /version on :8080, logs one line when it starts and one a minute, and
// ends cleanly on SIGTERM, so a scenario can read its logs, exec into it,
// probe it and tell its version from the outside. `testdaemon version`
// prints the version and exits (for kubectl exec: the image has no shell).
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	version, node := os.Getenv("VERSION"), os.Getenv("NODE_NAME")
	addr := ":8080"
	if len(os.Args) > 1 {
		if os.Args[1] == "version" {
			fmt.Println(version)
			return
		}
		addr = os.Args[1]
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, version) })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		log.Printf("testdaemon %s on node %q serving %s", version, node, addr)
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			log.Fatal(err)
		}
	}()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			log.Printf("testdaemon %s alive", version)
		case <-ctx.Done():
			log.Printf("testdaemon %s stopping", version)
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
			return
		}
	}
}
