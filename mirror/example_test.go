package mirror_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/tributary-dev/tributary/mirror"
	"github.com/tributary-dev/tributary/sink"
)

// A PostgreSQL -> Elasticsearch mirror built in Go, without YAML: every table of the public
// schema, one index per table. (Compile-only: it needs the servers.)
func Example() {
	cfg := &mirror.Config{
		State: "mirror.state",
		Pipelines: []mirror.PipelineConfig{{
			Name: "shop",
			Source: mirror.SourceConfig{
				Type:   "postgres",
				DSN:    sink.Secret(os.Getenv("PG_DSN")),
				Tables: []string{"public.*"},
			},
			Sink: sink.Config{
				ID:    "es",
				URL:   "http://127.0.0.1:9200",
				Index: "shop-{table}",
				Auth:  sink.Auth{Type: sink.AuthNone},
			},
			DLQ:    "shop.dlq.jsonl",
			Runner: mirror.RunnerConfig{BatchMaxWait: 200 * time.Millisecond},
		}},
	}
	m, err := mirror.Open(cfg, &mirror.Options{Logger: slog.Default()})
	if err != nil {
		slog.Error("configuration", "err", err)
		return
	}
	defer m.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := m.Run(ctx); err != nil {
		slog.Error("every pipeline stopped", "err", err)
	}
}
