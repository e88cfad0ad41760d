package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/mirror"
)

// prepareCluster is the prepare-cluster command: every cluster of cfg made to refuse
// auto-creating df-w-* indices (mirror.PrepareClusters), one paragraph per cluster on w. It
// fails while any cluster does not enforce the rule, a dry run included.
func prepareCluster(ctx context.Context, w io.Writer, cfg *mirror.Config, dryRun bool) error {
	reps, err := mirror.PrepareClusters(ctx, cfg, &mirror.PrepareOptions{DryRun: dryRun})
	if err != nil {
		return err
	}
	left := 0
	for _, r := range reps {
		name := "cluster " + r.ClusterUUID + " at " + r.URL
		if r.ClusterUUID == "" {
			name = "cluster at " + r.URL
		}
		fmt.Fprintf(w, "%s (pipelines %s):\n", name, strings.Join(r.Pipelines, ", "))
		if !r.Enforced() {
			left++
		}
		switch {
		case r.Before.Level == "" && r.Before.Why == "": // never read
			fmt.Fprintf(w, "  cannot read action.auto_create_index: %v\n", r.Err)
			if r.Lacks != "" {
				fmt.Fprintf(w, "  the sinks' credentials lack %s\n", r.Lacks)
			}
		case r.Before.Enforced:
			fmt.Fprintf(w, "  already enforced: %s\n", describe(r.Before))
		default:
			fmt.Fprintf(w, "  not enforced: %s\n", r.Before.Why)
			switch {
			case r.Applied && r.After.Enforced:
				fmt.Fprintf(w, "  applied: %s\n  now enforced: %s\n", r.Request, describe(r.After))
			case r.Applied:
				fmt.Fprintf(w, "  applied: %s\n  but still not enforced: %s\n", r.Request, r.After.Why)
			case dryRun:
				fmt.Fprintf(w, "  would send: %s\n", r.Request)
			default:
				fmt.Fprintf(w, "  not applied: %v\n", r.Err)
				if r.Lacks != "" {
					fmt.Fprintf(w, "  the sinks' credentials lack %s\n", r.Lacks)
				}
				fmt.Fprintf(w, "  send it as a user who may: %s\n", r.Request)
			}
		}
	}
	switch {
	case left == 0:
		return nil
	case dryRun:
		return fmt.Errorf("%d of %d clusters do not enforce the rule (dry run: nothing sent)", left, len(reps))
	}
	return fmt.Errorf("%d of %d clusters do not enforce the rule", left, len(reps))
}

// describe says what an enforced setting is.
func describe(a esfence.AutoCreate) string {
	s := "action.auto_create_index is " + strconv.Quote(a.Value) + " (" + a.Level + ")"
	if a.Value == "false" {
		s += ", which forbids auto-creating any index, df-w-* included (the sinks create theirs explicitly)"
	}
	return s
}

// unenforced finds a fencing_unenforced refusal in err (a pipeline refused at start, or at a
// claim) and prints it with what to run.
func unenforced(w io.Writer, err error) bool {
	if !errors.Is(err, esfence.FencingUnenforced) {
		return false
	}
	fmt.Fprintln(w, "cdcmirror: refusing to start: the cluster may auto-create df-w-* indices, so deletes could not be fenced:")
	fmt.Fprintln(w, " ", err)
	fmt.Fprintln(w, "  fix: cdcmirror prepare-cluster --config FILE (sends the request quoted above with the sink's credentials, or prints it for an administrator)")
	return true
}
