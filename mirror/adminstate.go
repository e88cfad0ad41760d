package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/statestore"
	"github.com/tributary-dev/tributary/statestore/sqlstate"
)

// adminLeaseTTL is how long Drop holds a pipeline's lease on a shared store: the pair's
// standby cannot take the pipeline over meanwhile. Released when Drop ends; a Drop that dies
// holding it delays the next takeover by at most this much.
const adminLeaseTTL = 5 * time.Minute

// openForPipeline validates cfg, finds the pipeline and opens its state for Drop, Inspect and
// Switch, telling a running mirror from other failures. A state file that does not exist is
// not created: the store is nil. With a shared store (Config.StateStore) and write set, the
// pipeline's lease is taken first -- refused with ErrRunning while a process holds it -- and
// the store returned is the view fenced by it (closing it releases the lease); without write
// the store is returned as it is, and a lease held is reported as ErrRunning alongside it.
func openForPipeline(ctx context.Context, cfg *Config, pipeline string, lock time.Duration, write bool) (*PipelineConfig, statestore.Store, error) {
	if cfg == nil {
		return nil, nil, errors.New("mirror: nil Config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	pc := cfg.Pipeline(pipeline)
	if pc == nil {
		return nil, nil, fmt.Errorf("%w: %q (the configuration has %s)", ErrNoPipeline, pipeline, strings.Join(cfg.Names(), ", "))
	}
	if cfg.StateStore != nil {
		return openShared(ctx, cfg, pc, write)
	}
	if lock <= 0 {
		lock = 2 * time.Second
	}
	if _, err := os.Stat(cfg.State); errors.Is(err, fs.ErrNotExist) {
		return pc, nil, nil
	}
	st, err := statestore.Open(cfg.State, &statestore.Options{LockTimeout: lock})
	if errors.Is(err, statestore.ErrLocked) {
		return nil, nil, fmt.Errorf("%w: the state file %s is in use (a running mirror holds it); stop it first", ErrRunning, cfg.State)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("mirror: state file: %w", err)
	}
	return pc, st, nil
}

// openShared opens the shared store for openForPipeline.
func openShared(ctx context.Context, cfg *Config, pc *PipelineConfig, write bool) (*PipelineConfig, statestore.Store, error) {
	l := newLeaderState(cfg.StateStore, 1)
	cctx, cancel := context.WithTimeout(ctx, 2*storeCallTimeout)
	st, err := l.open(cctx)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("mirror: state store: %w", err)
	}
	if !write {
		lease, err := st.ReadLease(ctx, pc.Name)
		if err != nil {
			_ = st.Close()
			return nil, nil, fmt.Errorf("mirror: state store: %w", err)
		}
		if lease.Held() {
			return pc, st, fmt.Errorf("%w: pipeline %q is active in %s (lease epoch %d)", ErrRunning, pc.Name, lease.Holder, lease.Epoch)
		}
		return pc, st, nil
	}
	lease, err := st.Acquire(ctx, pc.Name, l.holder+" (admin)", adminLeaseTTL)
	if errors.Is(err, statestore.ErrLeaseHeld) {
		_ = st.Close()
		return nil, nil, fmt.Errorf("%w: pipeline %q is active in %s (lease epoch %d); stop every process of the deployment first",
			ErrRunning, pc.Name, lease.Holder, lease.Epoch)
	}
	if err != nil {
		_ = st.Close()
		return nil, nil, fmt.Errorf("mirror: state store: %w", err)
	}
	return pc, &adminStore{Store: st.Fenced(pc.Name, lease.Epoch), shared: st, lease: lease}, nil
}

// adminStore is the shared store fenced by a lease an administrative command holds; Close
// releases the lease and closes the store.
type adminStore struct {
	statestore.Store
	shared *sqlstate.Store
	lease  statestore.Lease
}

func (a *adminStore) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
	defer cancel()
	err := a.shared.Release(ctx, a.lease)
	if errors.Is(err, statestore.ErrNotLeader) {
		err = nil
	}
	return errors.Join(err, a.Store.Close(), a.shared.Close())
}
