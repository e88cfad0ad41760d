// Package kafkaqueue implements package queue on Apache Kafka with franz-go: NewPublisher
// and NewConsumer take a Config per instance (brokers, topic, group, TLS, SASL, timeouts),
// so each store can use its own cluster. It passes the queuetest suite on kfake (franz-go's
// in-process broker) and on a real broker.
//
// # Publishing
//
// The producer is idempotent and waits for all in-sync replicas (acks=all); batching and
// linger are franz-go's defaults, and a call's records are flushed as soon as all are buffered
// (ProduceSync, on a goroutine of its own; each record's answer reaches its call through a
// produce hook). Publish copies the messages (a record may outlive the call, below), hands
// them to the client and returns when every one was acknowledged or failed -- or when
// Config.DeliveryTimeout has passed or ctx ended, whichever comes first, so a hung broker (a
// stopped process, a black-holed host) delays a Publish by at most the DeliveryTimeout. A
// failure is a *queue.PublishError with one classified error per message. Messages of one
// partition fail together and in order, so a failed message is never followed by a written
// later message of its partition from the same call.
//
// The idempotent producer never gives up a record it sent before the broker answered, since
// it cannot tell whether the broker wrote it; so every failure franz-go reports is a record
// not written. Records that can be failed safely (not sent, and not queued behind a sent
// one) and are not sent by the DeliveryTimeout less a slack (a fifth of it, at most 1s) are
// failed then: Unavailable. A record still unanswered when Publish returns is
// queue.OutcomeUnknown. If it was sent, franz-go keeps it until the broker answers, so it may
// be written later -- in its order in its partition, before the messages of later calls; if
// not, it is dropped at the first chance (Publish cancels its records' context on return).
// The DeliveryTimeout also sets how soon the client drops a connection whose broker stopped
// answering (the produce request timeout and the request timeout overhead, half of it each,
// at most 10s each): then it retries the unanswered records on a new connection, to the
// partition's current leader.
//
// # Consuming
//
// The consumer joins a group with auto-commit off and reads a partition its group never
// committed from the earliest offset. Fetch records, per partition of each topic, the offsets
// it hands out; Finish marks them; the finished prefix of each partition (up to the first
// unfinished offset) is what Commit sends, for all topics in one CommitOffsetsSync. Offsets
// need not be contiguous (compaction and transaction markers leave gaps), so the prefix is
// kept as the list of offsets handed out, not as a count.
//
// One consumer reads one Config.Topic, or several as one group member: Config.Topics (a
// Debezium source's topics, one per table, say), or every topic whose whole name matches
// Config.TopicPattern (a Go regular expression, anchored at both ends; names starting with
// "__" never match). franz-go lists every topic at each metadata refresh and matches each
// new name once; a matching topic created later makes the member rejoin the group with it,
// so it is consumed, from its first message, within about Config.MetadataMaxAge (default
// 5m) of its creation plus a rebalance. Named topics are checked (or created) at
// construction; a pattern checks nothing, as its topics may not exist yet.
//
// # Rebalancing
//
// BlockRebalanceOnPoll is on, but only for the instant between a poll and its bookkeeping:
// Fetch calls AllowRebalance before it returns. So the revocation callback never runs
// between franz-go handing out records and this package recording them, and a slow caller
// (a worker backing off on a retry) never holds up the group. When partitions are revoked
// from a live consumer, their finished prefix is committed in the callback (those of every
// topic in one request) and their unfinished messages are forgotten: the new owner receives
// them again, and a later Finish or Commit of them by the old owner changes nothing. Lost partitions (the member was
// expelled) are forgotten without a commit. Commit holds the same lock as the callback
// across the commit request, so a commit naming a partition cannot be sent after that
// partition moved to another member and move its offset backwards.
//
// A member that dies without leaving (a killed process) keeps its partitions until the group's
// session timeout expires, and nobody consumes them meanwhile: Config.SessionTimeout sets it
// (franz-go's 45s by default; the broker's group.min.session.timeout.ms, 6s by default, is
// the floor).
//
// # Monitoring
//
// A Monitor built from a Config (its Topic, Topics or TopicPattern: the topics it names or
// matches now, never internal ones) answers these questions cheaply, on a client of its own:
// Ping (do the brokers answer, with these credentials, and know the topic: one metadata
// request) and Lag (how many messages the group has not committed yet, per partition and in
// all: the depth of a store's queue). A partition the group never committed counts from its
// first retained message, where the group would start. Backlog is Lag plus the timestamp of
// the oldest message the group has not committed (the earliest, over the partitions with a
// lag, of the first message at the group's position, read with one small fetch per leader
// and cached per partition and offset, so a group that does not move costs no fetch), and
// Backlog.Age turns it into the age of the oldest unapplied record: 0 for an empty backlog,
// and growing with the clock from a Backlog kept while the brokers cannot be reached. Their
// errors are classified like everything else; for Ping, a deadline passing before the brokers
// answered is Unavailable.
//
// # Errors
//
// Errors are *queue.Error values naming the topic (for Topics, the list joined by ","; for
// TopicPattern, the pattern; the text then names the topic that failed): a missing topic
// is NotFound (at
// construction unless Config.CreateTopic is set, and from Publish if it disappears);
// refused connections, timeouts, retriable broker errors and failed group commits during
// a rebalance are Unavailable; a published message unanswered within the DeliveryTimeout,
// or when ctx ends, is OutcomeUnknown (above); authentication and authorization failures and untrusted
// certificates are Denied; a message or configuration the broker refuses (too large,
// invalid settings) is Invalid. Context errors come back bare; a closed client is
// queue.ErrClosed. No error or log line carries message contents or credentials.
//
// # Deviations
//
// None known from the queue contract. A consumer that is closed commits nothing, not even
// on the revocation that leaving the group causes. Retry policy and the dead-letter topic
// belong to the worker that consumes, not to this package.
package kafkaqueue
