package faultsuite

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/mirror"
)

// The pipeline under test is a mirror of one pipeline, built by the library's composition
// root from a Go-struct mirror.Config, as a user's program builds it.

// pipeline is what the suite needs of a running mirror.
type pipeline struct {
	run    func(ctx context.Context) error
	status func() cdc.Status
	// close releases files and clients once run returned; drop then removes the pipeline
	// (PostgreSQL slot and publication, indices, checkpoint and ownership records).
	close func()
	drop  func(ctx context.Context) error
}

func openPipeline(cfg *mirror.Config, log *slog.Logger) (*pipeline, error) {
	m, err := mirror.Open(cfg, &mirror.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	name := cfg.Pipelines[0].Name
	return &pipeline{
		run:    m.Run,
		status: func() cdc.Status { return m.Status()[0] },
		close:  func() { _ = m.Close() },
		drop: func(ctx context.Context) error {
			// The walsender of a stream just closed may hold the slot for a moment.
			for {
				_, err := mirror.Drop(ctx, cfg, name, &mirror.DropOptions{Indices: true})
				if !errors.Is(err, mirror.ErrRunning) || ctx.Err() != nil {
					return err
				}
				time.Sleep(200 * time.Millisecond)
			}
		},
	}, nil
}
