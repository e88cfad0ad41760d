// Package memqueue is the in-process implementation of package queue: topics of N
// partitions, consumer groups with committed offsets, at-least-once delivery. It is
// goroutine-safe, deterministic for a given sequence of calls, and passes the same
// conformance suite (queuetest) as kafkaqueue, which makes it the fake to use in unit tests
// of code that programs against queue.Publisher and queue.Consumer.
//
// # Model
//
// A Broker holds topics. A topic is created the first time a Publisher or Consumer names it,
// with Options.Partitions partitions, unless Options.RequireTopics asks for CreateTopic
// first. A message goes to the partition its key hashes to (FNV-1a), so equal keys share a
// partition; messages without a key are spread round-robin. Offsets count from 0 per
// partition; a committed offset is the offset of the next message to deliver, as in Kafka.
//
// Consumers of one (topic, group) share its partitions: each partition is owned by one
// consumer at a time, assigned in join order (partition p to member p mod n). When a consumer
// joins or leaves, the partitions are assigned again. A consumer that loses a partition
// while it is still open commits the finished prefix of that partition first (as kafkaqueue
// does on a revocation) and forgets its unfinished messages, which the new owner receives
// again from the committed offset. A consumer that closes commits nothing.
//
// # Faults
//
// FailNext makes the next Publish, Fetch or Commit fail with a given error; FailMessages
// makes the next Publish fail only some of its messages and write the others. Committed and
// Messages let a test look at what the broker holds.
//
// # Deviations
//
// Messages are kept forever (no retention) and nothing survives the process: "durable"
// means held by the Broker. Fetch hands out the stored Value, Key and Headers slices, which
// callers must not modify. Publish writes its messages atomically with respect to Fetch, which
// is more than Kafka promises; do not rely on it in code that must also run on kafkaqueue.
package memqueue
