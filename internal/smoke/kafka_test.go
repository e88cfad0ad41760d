package smoke

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/internal/testenv"
)

// kafkaPos identifies one record in the log.
type kafkaPos struct {
	Partition int32
	Offset    int64
}

// TestSmokeKafka proves the broker does what the Kafka sink relies on: explicit topic creation,
// acks=all idempotent produce with key-stable partitioning, and consumer groups whose manual
// commits decide exactly where the next member resumes.
func TestSmokeKafka(t *testing.T) {
	t.Parallel()
	url := testenv.Require(t, testenv.KafkaBrokers)
	seeds := strings.Split(url, ",")

	suffix := strings.ToLower(rand.Text()[:12])
	topic := "smoke-kafka-" + suffix
	group := "smoke-kafka-group-" + suffix
	const partitions = 3
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
	const perKey = 25 // records per key, so each partition holds enough to split into committed and rest

	// kadm answers Metadata from the client's cache for up to MetadataMinAge (5s by default); a
	// short age makes the create/delete checks observe the broker instead of that cache.
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	t.Cleanup(admCl.Close)
	adm := kadm.NewClient(admCl)

	// Best-effort removal when a subtest fails before the delete subtest; deleting an absent
	// topic or group is not an error worth reporting here.
	topicDeleted := false
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = adm.DeleteGroup(ctx, group)
		if !topicDeleted {
			if _, err := adm.DeleteTopic(ctx, topic); err != nil {
				t.Logf("cleanup: delete topic %s: %v", topic, err)
			}
		}
	})

	if !t.Run("create topic", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
		if err != nil {
			t.Fatalf("CreateTopic %s: %v", topic, err)
		}
		if resp.NumPartitions != partitions {
			t.Fatalf("CreateTopic answered %d partitions, want %d", resp.NumPartitions, partitions)
		}
		// Leaders are elected asynchronously after creation, so metadata may briefly lag.
		var last string
		for {
			md, err := adm.Metadata(ctx, topic)
			if err == nil {
				last = kafkaTopicProblem(md, topic, partitions)
				if last == "" {
					break
				}
			} else {
				last = err.Error()
			}
			if !kafkaSleep(ctx, 200*time.Millisecond) {
				t.Fatalf("topic %s never became fully led in metadata: %s", topic, last)
			}
		}
		listed, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatalf("ListTopics: %v", err)
		}
		if !listed.Has(topic) {
			t.Fatalf("ListTopics does not include %s", topic)
		}
	}) {
		return
	}

	// Filled by "produce": where each produced record landed, and all of them in log order.
	var produced []*kgo.Record
	if !t.Run("produce keyed acks=all", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		prod, err := kgo.NewClient(
			kgo.SeedBrokers(seeds...),
			kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
		)
		if err != nil {
			t.Fatalf("producer: %v", err)
		}
		defer prod.Close()

		// Several synchronous rounds, so per-key order has to survive separate produce requests.
		for round := 0; round < perKey; round++ {
			batch := make([]*kgo.Record, 0, len(keys))
			for _, k := range keys {
				batch = append(batch, &kgo.Record{Key: []byte(k), Value: []byte(k + ":" + strconv.Itoa(round))})
			}
			results := prod.ProduceSync(ctx, batch...)
			for _, res := range results {
				if res.Err != nil {
					t.Fatalf("produce %s (round %d): %v", res.Record.Value, round, res.Err)
				}
				if res.Record.Offset < 0 {
					t.Fatalf("produce %s acknowledged without an offset", res.Record.Value)
				}
				// A producer id is only assigned when the broker granted idempotent writes.
				if res.Record.ProducerID < 0 {
					t.Fatalf("record %s has no producer id: idempotent produce is not in effect", res.Record.Value)
				}
				produced = append(produced, res.Record)
			}
		}
		if err := kafkaCheckKeyOrder(produced); err != nil {
			t.Fatalf("as acknowledged: %v", err)
		}
		used := map[int32]bool{}
		for _, r := range produced {
			used[r.Partition] = true
		}
		if len(used) < 2 {
			t.Fatalf("%d keys all hashed into %d partition(s); the group checks need several", len(keys), len(used))
		}

		// Read everything back without a group: the log itself must show the same placement and order.
		rd, err := kgo.NewClient(
			kgo.SeedBrokers(seeds...),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		)
		if err != nil {
			t.Fatalf("reader: %v", err)
		}
		defer rd.Close()
		got, err := kafkaPollN(ctx, rd, len(produced))
		if err != nil {
			t.Fatalf("reading back: %v", err)
		}
		if err := kafkaCheckKeyOrder(got); err != nil {
			t.Fatalf("as read back: %v", err)
		}
		want := map[kafkaPos]string{}
		for _, r := range produced {
			want[kafkaPos{r.Partition, r.Offset}] = string(r.Value)
		}
		for _, r := range got {
			if v, ok := want[kafkaPos{r.Partition, r.Offset}]; !ok || v != string(r.Value) {
				t.Fatalf("read %q at %d/%d, produced %q there", r.Value, r.Partition, r.Offset, v)
			}
		}
	}) {
		return
	}

	t.Run("consumer group manual commit", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		groupOpts := []kgo.Opt{
			kgo.SeedBrokers(seeds...),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		}

		// First member: the only one in the group, so it owns every partition.
		first, err := kgo.NewClient(groupOpts...)
		if err != nil {
			t.Fatalf("first member: %v", err)
		}
		seen, err := kafkaPollN(ctx, first, len(produced))
		if err != nil {
			first.Close()
			t.Fatalf("first member: %v", err)
		}
		// Treat the first ~40% of each partition as processed and commit exactly those; the rest
		// stays uncommitted as if the member crashed before getting to it.
		byPart := map[int32][]*kgo.Record{}
		for _, r := range seen {
			byPart[r.Partition] = append(byPart[r.Partition], r)
		}
		wantCommitted := map[int32]int64{}
		var toCommit []*kgo.Record
		rest := map[kafkaPos]bool{}
		for p, rs := range byPart {
			if len(rs) < 2 {
				first.Close()
				t.Fatalf("partition %d holds %d record(s); need at least 2 to split", p, len(rs))
			}
			n := max(1, len(rs)*2/5)
			toCommit = append(toCommit, rs[:n]...)
			wantCommitted[p] = rs[n-1].Offset + 1
			for _, r := range rs[n:] {
				rest[kafkaPos{r.Partition, r.Offset}] = true
			}
		}
		if err := first.CommitRecords(ctx, toCommit...); err != nil {
			first.Close()
			t.Fatalf("CommitRecords: %v", err)
		}
		// With auto-commit off, closing must not commit what was polled beyond the manual commit.
		first.Close()

		fetched, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("FetchOffsets: %v", err)
		}
		if err := fetched.Error(); err != nil {
			t.Fatalf("FetchOffsets partition error: %v", err)
		}
		for p, want := range wantCommitted {
			o, ok := fetched.Lookup(topic, p)
			if !ok {
				t.Fatalf("no committed offset for %s/%d; want %d", topic, p, want)
			}
			if o.At != want {
				t.Fatalf("committed offset for %s/%d = %d, want %d", topic, p, o.At, want)
			}
		}
		if n := len(fetched.Offsets()[topic]); n != len(wantCommitted) {
			t.Fatalf("group has commits for %d partitions of %s, want %d", n, topic, len(wantCommitted))
		}

		// Second member of the same group: it must start right after the commits, not at the reset
		// offset (start) and not past what the first member polled but never committed.
		second, err := kgo.NewClient(groupOpts...)
		if err != nil {
			t.Fatalf("second member: %v", err)
		}
		defer second.Close()
		resumed, err := kafkaPollN(ctx, second, len(rest))
		if err != nil {
			t.Fatalf("second member: %v", err)
		}
		firstSeen := map[int32]int64{}
		for _, r := range resumed {
			pos := kafkaPos{r.Partition, r.Offset}
			if !rest[pos] {
				t.Fatalf("second member got %s/%d@%d (%q), which was committed or never produced",
					r.Topic, r.Partition, r.Offset, r.Value)
			}
			delete(rest, pos)
			if _, ok := firstSeen[r.Partition]; !ok {
				firstSeen[r.Partition] = r.Offset
			}
		}
		if len(rest) != 0 {
			t.Fatalf("second member missed %d uncommitted records", len(rest))
		}
		for p, want := range wantCommitted {
			if firstSeen[p] != want {
				t.Fatalf("second member resumed partition %d at %d, want %d", p, firstSeen[p], want)
			}
		}
	})

	t.Run("delete topic", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := adm.DeleteTopic(ctx, topic)
		if err != nil {
			t.Fatalf("DeleteTopic %s: %v", topic, err)
		}
		if resp.Err != nil {
			t.Fatalf("DeleteTopic %s: %v", topic, resp.Err)
		}
		topicDeleted = true
		for {
			md, err := adm.Metadata(ctx, topic)
			if err == nil {
				td, ok := md.Topics[topic]
				if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
					break
				}
			}
			if !kafkaSleep(ctx, 200*time.Millisecond) {
				t.Fatalf("topic %s still in metadata after delete", topic)
			}
		}
	})
}

// kafkaTopicProblem describes why topic is not yet usable in md, or returns "".
func kafkaTopicProblem(md kadm.Metadata, topic string, partitions int) string {
	td, ok := md.Topics[topic]
	switch {
	case !ok:
		return "topic absent"
	case td.Err != nil:
		return td.Err.Error()
	case len(td.Partitions) != partitions:
		return fmt.Sprintf("%d partitions, want %d", len(td.Partitions), partitions)
	}
	for _, p := range td.Partitions {
		if p.Err != nil {
			return fmt.Sprintf("partition %d: %v", p.Partition, p.Err)
		}
		if p.Leader < 0 || len(p.ISR) != 1 {
			return fmt.Sprintf("partition %d: leader %d, isr %v", p.Partition, p.Leader, p.ISR)
		}
	}
	return ""
}

// kafkaPollN polls cl until it has n records, failing on fetch errors or when ctx ends.
func kafkaPollN(ctx context.Context, cl *kgo.Client, n int) ([]*kgo.Record, error) {
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("got %d of %d records: %w", len(out), n, err)
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("fetch %s/%d: %w", topic, p, err))
		})
		if ferr != nil {
			return out, ferr
		}
		out = append(out, fs.Records()...)
	}
	if len(out) > n {
		return out, fmt.Errorf("got %d records, expected only %d", len(out), n)
	}
	return out, nil
}

// kafkaCheckKeyOrder verifies that every key stayed in one partition and that, within it, the
// values' round numbers rise with the offset (records written as "key:round").
func kafkaCheckKeyOrder(rs []*kgo.Record) error {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	part := map[string]int32{}
	lastRound := map[string]int{}
	for _, r := range sorted {
		k := string(r.Key)
		if p, ok := part[k]; ok && p != r.Partition {
			return fmt.Errorf("key %s in partitions %d and %d", k, p, r.Partition)
		}
		part[k] = r.Partition
		_, roundStr, ok := strings.Cut(string(r.Value), ":")
		round, err := strconv.Atoi(roundStr)
		if !ok || err != nil {
			return fmt.Errorf("unexpected value %q", r.Value)
		}
		if prev, seen := lastRound[k]; seen && round != prev+1 {
			return fmt.Errorf("key %s: round %d follows round %d at %d/%d", k, round, prev, r.Partition, r.Offset)
		} else if !seen && round != 0 {
			return fmt.Errorf("key %s starts at round %d", k, round)
		}
		lastRound[k] = round
	}
	return nil
}

// kafkaSleep waits d or until ctx ends, reporting whether the caller may go on.
func kafkaSleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
