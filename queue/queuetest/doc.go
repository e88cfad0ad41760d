// Package queuetest is the conformance suite of package queue. An implementation's test
// supplies a Harness and calls Run, which runs every behaviour as a subtest:
//
//	func TestConformance(t *testing.T) {
//		t.Run("memory", func(t *testing.T) { queuetest.Run(t, harness) })
//	}
//
// # Behaviours
//
//   - RoundTrip: keys, values and headers (repeated keys, order, empty values) come back as
//     published, with the topic, a partition and distinct offsets filled in.
//   - PerKeyOrder: many keys over many partitions, published in interleaved batches, arrive
//     in order per key, each key in one partition.
//   - UnfinishedGapHoldsCommit: a message fetched but not finished holds the commit of its
//     partition: a new consumer of the group receives it and everything after it again.
//   - NewConsumerResumesAfterCommit: a new consumer of the group resumes after the commit;
//     finished but uncommitted work is redelivered after Close (a crash); a new group starts
//     at the earliest message.
//   - FetchHonoursContext: Fetch returns the context's error, unwrapped, when it ends.
//   - UseAfterClose: Publish, Fetch and Commit after Close return queue.ErrClosed, and Close
//     ends a Fetch that is waiting.
//   - LargeBatch: one Publish of thousands of messages.
//   - ConcurrentPublishers: goroutines sharing publishers lose nothing and keep per-key order.
//   - SharedGroup: two consumers of one group share the work across a rebalance; every
//     message reaches one of them, and messages never finished are delivered again to the
//     next consumer of the group.
//
// # Isolation
//
// Each behaviour asks the Harness for a new topic and makes its own group names with a random
// part, so the suite can run again and again against a long-lived server.
package queuetest
