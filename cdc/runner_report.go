package cdc

import (
	"log/slog"
	"slices"
	"strings"
	"time"
)

// reporter rate-limits the Warn lines about dead letters and truncates, per (table, reason
// class): the first is logged at once with its table, op, position and reason; later ones are
// counted, and one line with the count goes out once ReportInterval has passed since the
// key's last line (checked after every batch) and when Run returns. The lines carry no row
// data: reasons never do (DeadLetter), and positions are the source's.
type reporter struct {
	interval time.Duration
	keys     map[reportKey]*reportState
}

type reportKey struct {
	table TableID
	class string // the reason up to its first ": " ("serialization failure", "malformed", ...); "truncate" for applied truncates
}

type reportState struct {
	last       time.Time // when the key's last line went out
	suppressed int       // occurrences since then, not logged one by one
	// latest is the most recent suppressed occurrence, shown in the summary line.
	latest reportLine
}

type reportLine struct {
	op       Op
	position string
	reason   string // empty for an applied truncate
}

func newReporter(interval time.Duration) reporter {
	return reporter{interval: interval, keys: map[reportKey]*reportState{}}
}

// reasonClass is the stable head of a dead-letter reason: the part before the first ": ",
// at most 64 bytes, so that reasons naming different columns or types share a rate limit.
func reasonClass(reason string) string {
	if i := strings.Index(reason, ": "); i >= 0 {
		reason = reason[:i]
	}
	if len(reason) > 64 {
		reason = reason[:64]
	}
	return reason
}

// report logs the batch's dead letters and the truncates the sink applied, rate-limited.
// refused are the sink's dead letters, indices into b.toSink.
func (r *Runner) report(b *batch, letters []DeadLetterRecord, refused []DeadLetter, now time.Time) {
	for i := range letters {
		ev := &letters[i].Event
		r.reports.note(r.log, now, reportKey{ev.Table, reasonClass(letters[i].Reason)},
			reportLine{op: ev.Op, position: positionText(ev.Position), reason: letters[i].Reason})
	}
	for i, e := range b.sinkEntry {
		ev := &b.entries[e]
		if ev.Op != Truncate || slices.ContainsFunc(refused, func(d DeadLetter) bool { return d.Index == i }) {
			continue
		}
		r.reports.note(r.log, now, reportKey{ev.Table, "truncate"},
			reportLine{op: ev.Op, position: positionText(ev.Position)})
	}
	r.reports.flush(r.log, now, false)
}

func positionText(p Position) string {
	if p == nil {
		return ""
	}
	return p.String()
}

func (rp *reporter) note(log *slog.Logger, now time.Time, k reportKey, l reportLine) {
	st := rp.keys[k]
	if st == nil {
		rp.keys[k] = &reportState{last: now}
		if k.class == "truncate" {
			log.Warn("table truncated at the source; the sink applied it", "table", k.table.String(), "position", l.position)
			return
		}
		log.Warn("event dead-lettered", "table", k.table.String(), "op", l.op.String(), "position", l.position, "reason", l.reason)
		return
	}
	st.suppressed++
	st.latest = l
}

// flush writes the summary line of every key with suppressed occurrences whose interval has
// passed -- of every such key when final.
func (rp *reporter) flush(log *slog.Logger, now time.Time, final bool) {
	for k, st := range rp.keys {
		if st.suppressed == 0 || (!final && now.Sub(st.last) < rp.interval) {
			continue
		}
		l := st.latest
		if k.class == "truncate" {
			log.Warn("tables truncated at the source since the last report; the sink applied them", "table", k.table.String(),
				"count", st.suppressed, "since", st.last, "last_position", l.position)
		} else {
			log.Warn("events dead-lettered since the last report", "table", k.table.String(), "reason_class", k.class,
				"count", st.suppressed, "since", st.last, "last_op", l.op.String(), "last_position", l.position, "last_reason", l.reason)
		}
		st.suppressed, st.last = 0, now
	}
}
