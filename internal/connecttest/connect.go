package connecttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/internal/testenv"
)

// EnvURL is the variable that names the test worker's REST URL (scripts/testenv/connect.sh
// writes it to .testenv/env).
const EnvURL = "TRIBUTARY_CONNECT_URL"

const (
	// CallTimeout bounds each REST request but the creation of a connector, which Connect
	// validates first (it connects to the database): that one has createTimeout.
	CallTimeout   = 30 * time.Second
	createTimeout = 100 * time.Second
	// StateTimeout bounds each wait for a connector state (RUNNING, PAUSED, STOPPED) and each
	// wait of the clean-up (an inactive slot, deleted topics).
	StateTimeout = 120 * time.Second
	// busyTimeout bounds the retries of a request the worker answers 409 (rebalancing) or with
	// a request timeout, both momentary while other tests create and delete connectors.
	busyTimeout = 60 * time.Second
)

// Connect is the test environment's Kafka Connect worker.
type Connect struct {
	URL     string   // REST root, without a trailing '/'
	Brokers []string // the Kafka it keeps its state, and the connectors' topics, on
}

// Require returns the test worker, or skips the test when TRIBUTARY_CONNECT_URL or
// TRIBUTARY_KAFKA_BROKERS is unset.
func Require(t testing.TB) *Connect {
	t.Helper()
	u := testenv.Require(t, EnvURL)
	brokers := testenv.Require(t, testenv.KafkaBrokers)
	return &Connect{URL: strings.TrimRight(u, "/"), Brokers: strings.Split(brokers, ",")}
}

// State is the state of a connector or one of its tasks: UNASSIGNED, RUNNING, PAUSED, STOPPED
// (connectors only), FAILED (Trace says why) or RESTARTING.
type State struct {
	State    string `json:"state"`
	WorkerID string `json:"worker_id"`
	Version  string `json:"version,omitempty"`
	Trace    string `json:"trace,omitempty"`
}

// TaskState is the state of one task.
type TaskState struct {
	ID int `json:"id"`
	State
}

// Status is GET /connectors/NAME/status.
type Status struct {
	Name      string      `json:"name"`
	Connector State       `json:"connector"`
	Tasks     []TaskState `json:"tasks"`
	Type      string      `json:"type"`
}

// CreatePostgres creates the Debezium PostgreSQL connector name on the database of
// TRIBUTARY_PG_DSN (skipping the test when that is unset) and returns once it and its task run;
// the test's clean-up removes it, its slot, its publication and its topics.
func (c *Connect) CreatePostgres(t testing.TB, name string, p PostgresConnector) {
	t.Helper()
	dsn := testenv.Require(t, testenv.PostgresDSN)
	cfg, err := postgresConfig(name, p, dsn)
	if err != nil {
		t.Fatalf("connecttest: connector %s: %v", name, err)
	}
	pg := &pgObjects{dsn: dsn, slot: cfg["slot.name"], publication: cfg["publication.name"]}
	c.create(t, name, cfg, pg)
}

// CreateMariaDB creates the Debezium MariaDB connector name on the server of TRIBUTARY_MYSQL_DSN
// (skipping the test when that is unset) and returns once it and its task run; the test's
// clean-up removes it and its topics (the schema history topic too).
func (c *Connect) CreateMariaDB(t testing.TB, name string, m MariaDBConnector) {
	t.Helper()
	my, err := testenv.ParseMySQLDSN(testenv.Require(t, testenv.MySQLDSN))
	if err != nil {
		t.Fatalf("connecttest: %s: %v", testenv.MySQLDSN, err)
	}
	cfg, err := mariadbConfig(name, m, my, c.Brokers)
	if err != nil {
		t.Fatalf("connecttest: connector %s: %v", name, err)
	}
	c.create(t, name, cfg, nil)
}

// Status returns the connector's status; it fails the test when there is no such connector.
func (c *Connect) Status(t testing.TB, name string) Status {
	t.Helper()
	st, found, err := c.status(name)
	if err != nil {
		t.Fatalf("connecttest: status of %s: %v", name, err)
	}
	if !found {
		t.Fatalf("connecttest: no connector %s", name)
	}
	return st
}

// Pause pauses the connector and returns once it and its tasks are PAUSED.
func (c *Connect) Pause(t testing.TB, name string) {
	t.Helper()
	c.must(t, http.MethodPut, "/connectors/"+url.PathEscape(name)+"/pause", nil, http.StatusAccepted)
	c.wait(t, name, "PAUSED", StateTimeout)
}

// Resume resumes a paused connector and returns once it and its tasks are RUNNING.
func (c *Connect) Resume(t testing.TB, name string) {
	t.Helper()
	c.must(t, http.MethodPut, "/connectors/"+url.PathEscape(name)+"/resume", nil, http.StatusAccepted)
	c.wait(t, name, "RUNNING", StateTimeout)
}

// Restart restarts the connector and its tasks (POST restart?includeTasks=true) and returns once
// they are RUNNING again.
func (c *Connect) Restart(t testing.TB, name string) {
	t.Helper()
	c.must(t, http.MethodPost, "/connectors/"+url.PathEscape(name)+"/restart?includeTasks=true", nil,
		http.StatusAccepted, http.StatusNoContent)
	// The answer comes before the restart happens: wait (briefly) to see it under way, so that
	// the RUNNING below is the new instance's and not the old one's.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		st, found, err := c.status(name)
		if err == nil && found && (st.Connector.State != "RUNNING" || slices.ContainsFunc(st.Tasks, func(s TaskState) bool { return s.State.State != "RUNNING" })) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.wait(t, name, "RUNNING", StateTimeout)
}

// create removes a connector of the same name left by an earlier run, registers the clean-up,
// posts the connector and waits until it and its one task run.
func (c *Connect) create(t testing.TB, name string, cfg map[string]string, pg *pgObjects) {
	t.Helper()
	if _, found, err := c.status(name); err != nil {
		t.Fatalf("connecttest: status of %s: %v", name, err)
	} else if found {
		t.Logf("connecttest: removing connector %s, left by an earlier run", name)
		if err := c.removeConnector(name); err != nil {
			t.Fatalf("connecttest: %v", err)
		}
	}
	if pg != nil {
		// A slot or publication of this name left by an earlier run: a new connector would
		// stream from the old slot's position.
		if dropped, err := pg.drop(true); err != nil {
			t.Fatalf("connecttest: %v", err)
		} else if dropped {
			t.Logf("connecttest: dropped replication slot %s, left by an earlier run", pg.slot)
		}
	}
	t.Cleanup(func() {
		if err := c.removeConnector(name); err != nil {
			t.Errorf("connecttest: clean-up: %v", err)
		}
		if pg != nil {
			if _, err := pg.drop(false); err != nil {
				t.Errorf("connecttest: clean-up of connector %s: %v", name, err)
			}
		}
		if err := c.deleteTopics(ownsTopic(cfg)); err != nil {
			t.Errorf("connecttest: clean-up of connector %s: %v", name, err)
		}
	})
	body := map[string]any{"name": name, "config": cfg}
	status, answer, err := c.retry(http.MethodPost, "/connectors", body, createTimeout)
	if err != nil {
		t.Fatalf("connecttest: creating connector %s: %v", name, err)
	}
	if status != http.StatusCreated {
		t.Fatalf("connecttest: creating connector %s: HTTP %d %s", name, status, answer)
	}
	st := c.wait(t, name, "RUNNING", StateTimeout)
	if len(st.Tasks) != 1 {
		t.Fatalf("connecttest: connector %s runs %d tasks, want 1", name, len(st.Tasks))
	}
}

// wait polls the connector's status until it and every task are in state (STOPPED: no task
// left), for up to timeout. A FAILED connector or task fails the test with its trace.
func (c *Connect) wait(t testing.TB, name, state string, timeout time.Duration) Status {
	t.Helper()
	st, err := c.waitState(name, state, timeout)
	if err != nil {
		t.Fatalf("connecttest: %v", err)
	}
	return st
}

func (c *Connect) waitState(name, state string, timeout time.Duration) (Status, error) {
	deadline := time.Now().Add(timeout)
	var last Status
	for {
		st, found, err := c.status(name)
		if err == nil && found {
			last = st
			if st.Connector.State == "FAILED" && state != "STOPPED" {
				return st, fmt.Errorf("connector %s FAILED: %s", name, st.Connector.Trace)
			}
			done := st.Connector.State == state
			for _, task := range st.Tasks {
				if task.State.State == "FAILED" && state != "STOPPED" {
					return st, fmt.Errorf("task %d of connector %s FAILED: %s", task.ID, name, task.Trace)
				}
				done = done && task.State.State == state
			}
			if state == "STOPPED" {
				done = done && len(st.Tasks) == 0
			} else if state != "PAUSED" {
				done = done && len(st.Tasks) > 0
			}
			if done {
				return st, nil
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return last, fmt.Errorf("connector %s not %s after %v: %w", name, state, timeout, err)
			}
			return last, fmt.Errorf("connector %s not %s after %v; last status %+v", name, state, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// status is GET /connectors/NAME/status; found is false on 404.
func (c *Connect) status(name string) (st Status, found bool, err error) {
	code, body, err := c.retry(http.MethodGet, "/connectors/"+url.PathEscape(name)+"/status", nil, CallTimeout)
	if err != nil {
		return st, false, err
	}
	switch code {
	case http.StatusOK:
		if err := json.Unmarshal(body, &st); err != nil {
			return st, false, fmt.Errorf("status of %s: %w", name, err)
		}
		return st, true, nil
	case http.StatusNotFound:
		return st, false, nil
	default:
		return st, false, fmt.Errorf("status of %s: HTTP %d %s", name, code, body)
	}
}

// removeConnector stops the connector, waits until it is STOPPED, deletes its offsets (KIP-875:
// only a stopped connector's can be) and deletes it. No such connector is no error.
func (c *Connect) removeConnector(name string) error {
	path := "/connectors/" + url.PathEscape(name)
	code, body, err := c.retry(http.MethodPut, path+"/stop", nil, CallTimeout)
	if err != nil {
		return fmt.Errorf("stopping connector %s: %w", name, err)
	}
	switch code {
	case http.StatusNotFound:
		return nil
	case http.StatusAccepted, http.StatusNoContent, http.StatusOK:
	default:
		return fmt.Errorf("stopping connector %s: HTTP %d %s", name, code, body)
	}
	var errs []error
	if _, err := c.waitState(name, "STOPPED", StateTimeout); err != nil {
		errs = append(errs, err)
	} else if code, body, err := c.retry(http.MethodDelete, path+"/offsets", nil, CallTimeout); err != nil {
		errs = append(errs, fmt.Errorf("deleting the offsets of connector %s: %w", name, err))
	} else if code != http.StatusOK {
		errs = append(errs, fmt.Errorf("deleting the offsets of connector %s: HTTP %d %s", name, code, body))
	}
	// Deleted also when its offsets could not be: a connector left behind would keep its slot
	// or binlog client busy.
	if code, body, err := c.retry(http.MethodDelete, path, nil, CallTimeout); err != nil {
		errs = append(errs, fmt.Errorf("deleting connector %s: %w", name, err))
	} else if code != http.StatusNoContent && code != http.StatusNotFound {
		errs = append(errs, fmt.Errorf("deleting connector %s: HTTP %d %s", name, code, body))
	}
	return errors.Join(errs...)
}

// must sends a request and fails the test unless the answer has one of the statuses ok.
func (c *Connect) must(t testing.TB, method, path string, body any, ok ...int) []byte {
	t.Helper()
	code, answer, err := c.retry(method, path, body, CallTimeout)
	if err != nil {
		t.Fatalf("connecttest: %s %s: %v", method, path, err)
	}
	if !slices.Contains(ok, code) {
		t.Fatalf("connecttest: %s %s: HTTP %d %s", method, path, code, answer)
	}
	return answer
}

// retry sends a request and sends it again, for up to busyTimeout, while the worker answers that
// it is momentarily busy: 409 during a rebalance (not "already exists"), or 500 "Request timed
// out". A POST whose first try timed out may have created the connector, so "already exists"
// after such a try counts as created.
func (c *Connect) retry(method, path string, body any, timeout time.Duration) (int, []byte, error) {
	deadline := time.Now().Add(busyTimeout)
	timedOut := false
	for {
		code, answer, err := c.call(method, path, body, timeout)
		if err != nil {
			return 0, nil, err
		}
		switch {
		case code == http.StatusConflict && bytes.Contains(answer, []byte("already exists")):
			if timedOut && method == http.MethodPost {
				return http.StatusCreated, answer, nil
			}
			return code, answer, nil
		case code == http.StatusConflict,
			code == http.StatusInternalServerError && bytes.Contains(answer, []byte("timed out")):
			timedOut = timedOut || code == http.StatusInternalServerError
			if time.Now().After(deadline) {
				return code, answer, nil
			}
			time.Sleep(250 * time.Millisecond)
		default:
			return code, answer, nil
		}
	}
}

// call sends one request, bounded by timeout; err is set only when no answer came.
func (c *Connect) call(method, path string, body any, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req) // bounded by ctx
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return resp.StatusCode, answer, nil
}

// deleteTopics deletes the topics owned says are a connector's and waits until Kafka no longer
// lists them.
func (c *Connect) deleteTopics(owned func(string) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), StateTimeout)
	defer cancel()
	// A short metadata age: the listings below must see the broker, not the client's cache.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	mine := func() ([]string, error) {
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing topics: %w", err)
		}
		var names []string
		for _, name := range td.Names() {
			if owned(name) {
				names = append(names, name)
			}
		}
		return names, nil
	}
	names, err := mine()
	if err != nil || len(names) == 0 {
		return err
	}
	resps, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("deleting topics %v: %w", names, err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("deleting topic %s: %w", r.Topic, r.Err)
		}
	}
	for {
		left, err := mine()
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %v still listed %v after their deletion", left, StateTimeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// pgObjects is what a PostgreSQL connector makes on the server besides topics.
type pgObjects struct {
	dsn, slot, publication string
}

// drop drops the replication slot once no connection uses it (before a connector is created:
// only an inactive one, refusing an active one) and the publication. dropped reports a slot
// dropped.
func (p *pgObjects) drop(before bool) (dropped bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), StateTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return false, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.Background())
	for {
		var active bool
		err = conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", p.slot).Scan(&active)
		if errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if err != nil {
			return false, fmt.Errorf("reading replication slot %s: %w", p.slot, err)
		}
		if !active {
			if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", p.slot); err != nil {
				return dropped, fmt.Errorf("dropping replication slot %s: %w", p.slot, err)
			}
			dropped = true
			break
		}
		if before {
			return dropped, fmt.Errorf("replication slot %s is in use: another connector or test has it", p.slot)
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("replication slot %s still active %v after its connector was deleted", p.slot, StateTimeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{p.publication}.Sanitize()); err != nil {
		return dropped, fmt.Errorf("dropping publication %s: %w", p.publication, err)
	}
	return dropped, nil
}
