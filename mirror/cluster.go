package mirror

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"

	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/sink"
	"github.com/tributary-dev/tributary/statestore"
)

// PrepareOptions configure PrepareClusters. The zero value (or nil) applies what is needed.
type PrepareOptions struct {
	// DryRun reads every cluster's setting and reports the request that would enforce the
	// rule, sending none.
	DryRun bool
}

// ClusterReport is what PrepareClusters found and did on one cluster. It carries rule values
// and names only, never credentials.
type ClusterReport struct {
	// ClusterUUID names the cluster ("" when none of its sinks could read it); URL is its
	// sinks' configured url without credentials; Pipelines are the pipelines writing to it,
	// in configuration order.
	ClusterUUID string
	URL         string
	Pipelines   []string
	// Before is the setting as found (zero when it could not be read: see Err), After as
	// PrepareClusters left it (Before when nothing was sent).
	Before, After esfence.AutoCreate
	// Applied is true when the request was sent and accepted; Request is that request (or
	// the one a dry run, or a user without the privilege, would need); "" when the rule was
	// already enforced.
	Applied bool
	Request string
	// Err is why the setting could not be read or the request not applied (the last sink's
	// error when several were tried); Lacks names the privilege the sinks' credentials lack
	// when the cluster answered 403.
	Err   error
	Lacks string
}

// Enforced reports whether the cluster now refuses to auto-create df-w-* indices.
func (r *ClusterReport) Enforced() bool { return r.Err == nil && r.After.Enforced }

// The privileges a 403 means for each request.
const (
	lacksMonitor = "the monitor cluster privilege (reading cluster settings)"
	lacksUpdate  = "the privilege to update cluster settings (Elasticsearch: the manage cluster privilege; " +
		"OpenSearch: cluster:admin/settings/update, e.g. in cluster_all)"
)

// PrepareClusters makes every cluster cfg's pipelines write to enforce the deployment
// requirement (package esfence, "Deployment requirement"): for each distinct cluster (told
// apart by cluster_uuid) it reads the effective action.auto_create_index with the sinks'
// credentials and, when it does not forbid auto-creating df-w-* indices, sends the request
// that makes it (AutoCreate.Request: -df-w-* before the cluster's own rules, persistent, a
// transient value reset), trying the credentials of each sink of that cluster until one is
// allowed. A cluster that already enforces it is left alone. With opts.DryRun nothing is
// sent. It opens neither the state file nor any source, so it may run before the first start
// or beside a running mirror. The error is for cfg and ctx only; what happened on each cluster
// is in its report (ClusterReport.Enforced, Err).
func PrepareClusters(ctx context.Context, cfg *Config, opts *PrepareOptions) ([]ClusterReport, error) {
	if cfg == nil {
		return nil, errors.New("mirror: nil Config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o PrepareOptions
	if opts != nil {
		o = *opts
	}
	type member struct {
		pc *PipelineConfig
		s  *sink.Sink
	}
	type group struct {
		rep     ClusterReport
		members []member
		read    bool
	}
	var groups []*group
	find := func(uuid, u string) *group {
		for _, g := range groups {
			if (uuid != "" && g.rep.ClusterUUID == uuid) || (uuid == "" && g.rep.URL == u) {
				return g
			}
		}
		return nil
	}
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		// The auto-create requests need no state: an in-memory store stands in for the file.
		s, err := sink.New(pc.Sink, pc.Name, statestore.NewMemory(), nil)
		if err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: %w", pc.Name, err)
		}
		defer s.Close()
		u := redactedURL(pc.Sink.Nodes()[0]) // url, or the first of urls (Validate: one at least)
		a, err := s.AutoCreate(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		g := find(a.ClusterUUID, u)
		if g == nil && err == nil {
			g = find("", u) // a group of sinks that could not read it, at the same url
		}
		if g == nil {
			g = &group{rep: ClusterReport{URL: u}}
			groups = append(groups, g)
		}
		g.rep.Pipelines = append(g.rep.Pipelines, pc.Name)
		g.members = append(g.members, member{pc, s})
		switch {
		case err == nil && !g.read:
			g.read, g.rep.ClusterUUID, g.rep.Before, g.rep.Err, g.rep.Lacks = true, a.ClusterUUID, a, nil, ""
		case err != nil && !g.read:
			g.rep.Err, g.rep.Lacks = err, lacks(err, lacksMonitor)
		}
	}
	out := make([]ClusterReport, 0, len(groups))
	for _, g := range groups {
		r := &g.rep
		r.After = r.Before
		if !g.read || r.Before.Enforced {
			out = append(out, *r)
			continue
		}
		r.Request = r.Before.Request()
		if o.DryRun {
			out = append(out, *r)
			continue
		}
		var tried []sink.Auth
		for _, m := range g.members {
			if containsAuth(tried, m.pc.Sink.Auth) {
				continue
			}
			tried = append(tried, m.pc.Sink.Auth)
			after, err := m.s.EnforceAutoCreate(ctx, r.Before)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err == nil {
				r.Applied, r.After, r.Err, r.Lacks = true, after, nil, ""
				break
			}
			r.Err, r.Lacks = err, lacks(err, lacksUpdate)
		}
		out = append(out, *r)
	}
	return out, nil
}

// lacks is what a 403 answer means, "" for any other error.
func lacks(err error, privilege string) string {
	var se *esfence.ServerError
	if errors.As(err, &se) && se.Status == http.StatusForbidden {
		return privilege
	}
	return ""
}

func containsAuth(list []sink.Auth, a sink.Auth) bool {
	for _, x := range list {
		if reflect.DeepEqual(x, a) {
			return true
		}
	}
	return false
}

// redactedURL is u without user information (a URL may carry a password).
func redactedURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable url)"
	}
	p.User = nil
	return p.String()
}
