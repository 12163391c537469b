// Package broker implements Kawa's Kafka API handlers: one file per API, each
// opening with the versions it supports, its behaviour and the KIPs it
// follows. The handler table in apis.go is the single source of the versions
// advertised by ApiVersions.
//
// Ownership: Broker owns the live partition registry (mu guards the map of
// topic name -> partitions; each Partition has its own lock), the topic
// catalog and the producer ID allocator. Handlers run on connection reader
// goroutines (the ordered part, e.g. a Produce append) and writer goroutines
// (replies that wait: fsync, long-poll fetch); none holds mu while waiting.
//
// The group coordinator (group_store.go) and the transaction coordinator
// (txn.go) each keep their state in partition 0 of an internal topic
// (__consumer_offsets, __transaction_state), replayed at Open; the
// transaction coordinator reaches data partitions and groups only through the
// interfaces it declares, implemented here. Close stops it first, since it
// writes to both.
package broker
