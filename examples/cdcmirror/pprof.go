//go:build pprof

// A profiling hook for benchmarks only (scripts/bench-peers BENCH_PEERS_PROFILE): built with
// `-tags pprof`, cdcmirror serves net/http/pprof on CDCMIRROR_PPROF_ADDR (a loopback address)
// so a run's CPU profile shows where the time goes. The default build has no such endpoint.
package main

import (
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("CDCMIRROR_PPROF_ADDR")
	if addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
		log.Printf("cdcmirror: pprof: CDCMIRROR_PPROF_ADDR %q is not a loopback host:port: not serving pprof", addr)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Printf("cdcmirror: pprof: %v", err)
		return
	}
	go func() { _ = http.Serve(ln, mux) }()
}
