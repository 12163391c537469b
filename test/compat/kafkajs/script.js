// kafkajs 2.2.4 against a Kawa broker: admin, idempotent producer,
// consumer group and (when the broker has them) transactions.
//
// Usage: node script.js <host:port>   (KAFKAJS_LOG=1 for client logs)
// Exits non-zero on the first failed assertion. KAWA_TXN=1 enables the
// transactional part; without it that part is skipped with a note.
'use strict'

const assert = require('node:assert/strict')
const { Kafka, logLevel, CompressionTypes, ConfigResourceTypes } = require('kafkajs')

const broker = process.argv[2]
if (!broker) {
  console.error('usage: node script.js <host:port>')
  process.exit(2)
}

const kafka = new Kafka({
  clientId: 'kawa-compat',
  brokers: [broker],
  // Expected protocol errors (TOPIC_ALREADY_EXISTS, ...) log at ERROR.
  logLevel: process.env.KAFKAJS_LOG ? logLevel.DEBUG : logLevel.NOTHING,
  retry: { retries: 3, initialRetryTime: 50 },
})

const start = Date.now()
const step = name => console.log(`kafkajs: +${Date.now() - start}ms ${name}`)

// waitFor polls fn every 20 ms until it returns a truthy value or ms pass.
const waitFor = async (what, fn, ms = 15000) => {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(r => setTimeout(r, 20))
  }
}

const byPartition = rows => [...rows].sort((a, b) => a.partition - b.partition)

async function adminTopics(admin) {
  step('createTopics with configs, then again (false)')
  const created = await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic: 'kjs-admin', numPartitions: 3, configEntries: [{ name: 'retention.ms', value: '3600000' }] },
    ],
  })
  assert.equal(created, true)
  assert.equal(await admin.createTopics({ topics: [{ topic: 'kjs-admin', numPartitions: 3 }] }), false)
  await assert.rejects(
    admin.createTopics({ topics: [{ topic: 'kjs-bad', configEntries: [{ name: 'retention.ms', value: 'x' }] }] }),
    e => e.name === 'KafkaJSAggregateError' && e.errors[0].type === 'INVALID_CONFIG'
  )
  assert.ok((await admin.listTopics()).includes('kjs-admin'))

  step('fetchTopicMetadata')
  const { topics } = await admin.fetchTopicMetadata({ topics: ['kjs-admin'] })
  assert.equal(topics.length, 1)
  assert.equal(topics[0].name, 'kjs-admin')
  assert.deepEqual(
    byPartition(topics[0].partitions).map(p => [p.partitionId, p.partitionErrorCode, p.replicas.length, p.isr.length]),
    [[0, 0, 1, 1], [1, 0, 1, 1], [2, 0, 1, 1]]
  )
  const cluster = await admin.describeCluster()
  assert.equal(cluster.brokers.length, 1)
  assert.equal(`${cluster.brokers[0].host}:${cluster.brokers[0].port}`, broker)
  assert.equal(cluster.controller, cluster.brokers[0].nodeId)

  step('describeConfigs / alterConfigs')
  const describe = async names => {
    const res = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: 'kjs-admin', configNames: names }],
    })
    assert.equal(res.resources.length, 1)
    assert.equal(res.resources[0].errorCode, 0)
    return Object.fromEntries(res.resources[0].configEntries.map(c => [c.configName, c]))
  }
  let cfg = await describe(['retention.ms', 'cleanup.policy'])
  assert.deepEqual(Object.keys(cfg).sort(), ['cleanup.policy', 'retention.ms'])
  assert.equal(cfg['retention.ms'].configValue, '3600000')
  assert.equal(cfg['retention.ms'].isDefault, false)
  assert.equal(cfg['cleanup.policy'].configValue, 'delete')
  assert.equal(cfg['cleanup.policy'].isDefault, true)
  const altered = await admin.alterConfigs({
    validateOnly: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: 'kjs-admin', configEntries: [{ name: 'retention.ms', value: '7200000' }] }],
  })
  assert.equal(altered.resources[0].errorCode, 0)
  cfg = await describe(undefined) // all configs (kafkajs sends null)
  assert.equal(cfg['retention.ms'].configValue, '7200000')
  assert.ok(Object.keys(cfg).length >= 5, 'all topic configs listed')

  step('createPartitions')
  await admin.createPartitions({ topicPartitions: [{ topic: 'kjs-admin', count: 4 }] })
  const after = await admin.fetchTopicMetadata({ topics: ['kjs-admin'] })
  assert.equal(after.topics[0].partitions.length, 4)
  await assert.rejects(
    admin.createPartitions({ topicPartitions: [{ topic: 'kjs-admin', count: 2 }] }),
    e => e.type === 'INVALID_PARTITIONS'
  )
}

async function producerAndOffsets(admin) {
  step('idempotent producer, acks -1, gzip')
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false })
  await producer.connect()
  const t0 = 1_700_000_000_000
  const messages = Array.from({ length: 10 }, (_, i) => ({
    partition: 0,
    key: `k${i}`,
    value: i === 4 ? null : `v${i}`,
    timestamp: String(t0 + i * 1000),
    headers: { i: String(i) },
  }))
  const sent = await producer.send({ topic: 'kjs-admin', acks: -1, compression: CompressionTypes.GZIP, messages })
  assert.equal(sent.length, 1)
  assert.equal(sent[0].topicName, 'kjs-admin')
  assert.equal(sent[0].partition, 0)
  assert.equal(sent[0].errorCode, 0)
  assert.equal(sent[0].baseOffset, '0')
  const more = await producer.send({ topic: 'kjs-admin', acks: -1, messages: [{ partition: 1, value: 'p1' }] })
  assert.equal(more[0].baseOffset, '0')
  await assert.rejects(
    producer.send({ topic: 'kjs-missing', acks: -1, messages: [{ value: 'x' }] }),
    e => /does not host this topic-partition|UNKNOWN_TOPIC_OR_PARTITION/i.test(`${e.type} ${e.message}`)
  )
  await producer.disconnect()

  step('auto-creation through a default producer')
  const auto = kafka.producer()
  await auto.connect()
  const autoSent = await auto.send({ topic: 'kjs-auto', messages: [{ value: 'a' }] })
  assert.deepEqual([autoSent[0].partition, autoSent[0].baseOffset, autoSent[0].errorCode], [0, '0', 0])
  await auto.disconnect()
  assert.equal((await admin.fetchTopicMetadata({ topics: ['kjs-auto'] })).topics[0].partitions.length, 1)

  step('fetchTopicOffsets / fetchTopicOffsetsByTimestamp')
  const offs = byPartition(await admin.fetchTopicOffsets('kjs-admin'))
  assert.deepEqual(offs.map(o => [o.partition, o.low, o.high, o.offset]), [
    [0, '0', '10', '10'], [1, '0', '1', '1'], [2, '0', '0', '0'], [3, '0', '0', '0'],
  ])
  const byTime = byPartition(await admin.fetchTopicOffsetsByTimestamp('kjs-admin', t0 + 4500))
  // Partition 0: the first record at or after t0+4.5s is offset 5 (inside
  // one gzip batch); partition 1's record has the current time. Empty
  // partitions answer -1, which kafkajs replaces by the high watermark.
  assert.deepEqual(byTime.map(o => [o.partition, o.offset]), [[0, '5'], [1, '0'], [2, '0'], [3, '0']])
  const future = byPartition(await admin.fetchTopicOffsetsByTimestamp('kjs-admin', Date.now() + 3600_000))
  assert.deepEqual(future.map(o => [o.partition, o.offset]), [[0, '10'], [1, '1'], [2, '0'], [3, '0']])

  step('deleteTopicRecords')
  await admin.deleteTopicRecords({ topic: 'kjs-admin', partitions: [{ partition: 0, offset: '3' }] })
  const low = byPartition(await admin.fetchTopicOffsets('kjs-admin'))
  assert.deepEqual([low[0].low, low[0].high], ['3', '10'])
  return messages
}

async function consumerGroup(admin, produced) {
  step('consumer group: eachMessage with commits')
  const groupId = 'kjs-group'
  const got = []
  const committed = {}
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100, heartbeatInterval: 500 })
  consumer.on(consumer.events.COMMIT_OFFSETS, ({ payload }) => {
    for (const t of payload.topics) for (const p of t.partitions) committed[p.partition] = p.offset
  })
  await consumer.connect()
  await consumer.subscribe({ topics: ['kjs-admin'], fromBeginning: true })
  await consumer.run({
    autoCommitThreshold: 1,
    eachMessage: async ({ partition, message }) => {
      got.push({ partition, offset: message.offset, key: message.key && message.key.toString(), value: message.value, message })
    },
  })
  // Partition 0 starts at the log start 3 (after deleteTopicRecords).
  await waitFor('8 messages and their commits', () => got.length >= 8 && committed[0] === '10' && committed[1] === '1')
  const p0 = got.filter(m => m.partition === 0)
  assert.deepEqual(p0.map(m => m.offset), ['3', '4', '5', '6', '7', '8', '9'])
  for (const m of p0) {
    const want = produced[Number(m.offset)]
    assert.equal(m.key, want.key)
    assert.equal(m.value === null ? null : m.value.toString(), want.value)
    assert.equal(m.message.timestamp, want.timestamp)
    assert.equal(m.message.headers.i.toString(), want.headers.i)
  }
  assert.deepEqual(got.filter(m => m.partition === 1).map(m => m.value.toString()), ['p1'])

  step('describeGroups / listGroups while running')
  let desc = await admin.describeGroups([groupId])
  assert.equal(desc.groups[0].state, 'Stable')
  assert.equal(desc.groups[0].protocolType, 'consumer')
  assert.equal(desc.groups[0].members.length, 1)
  const { groups } = await admin.listGroups()
  assert.ok(groups.some(g => g.groupId === groupId && g.protocolType === 'consumer'))
  await assert.rejects(admin.deleteGroups([groupId]), e => e.name === 'KafkaJSDeleteGroupsError' && e.groups[0].error.type === 'NON_EMPTY_GROUP')

  step('seek inside a running consumer')
  got.length = 0
  consumer.seek({ topic: 'kjs-admin', partition: 0, offset: '6' })
  await waitFor('re-read after seek', () => got.length >= 4)
  assert.deepEqual(got.map(m => [m.partition, m.offset]), [[0, '6'], [0, '7'], [0, '8'], [0, '9']])
  await consumer.disconnect()

  step('fetchOffsets / resetOffsets / deleteGroups')
  desc = await admin.describeGroups([groupId])
  assert.equal(desc.groups[0].state, 'Empty')
  const fetched = await admin.fetchOffsets({ groupId, topics: ['kjs-admin'] })
  assert.deepEqual(byPartition(fetched[0].partitions).map(p => [p.partition, p.offset]), [
    [0, '10'], [1, '1'], [2, '-1'], [3, '-1'],
  ])
  await admin.resetOffsets({ groupId, topic: 'kjs-admin', earliest: true })
  const reset = await admin.fetchOffsets({ groupId, topics: ['kjs-admin'] })
  assert.deepEqual(byPartition(reset[0].partitions).map(p => p.offset), ['-2', '-2', '-2', '-2'])
  const deleted = await admin.deleteGroups([groupId])
  assert.deepEqual(deleted.map(d => [d.groupId, d.errorCode]), [[groupId, 0]])
  assert.equal((await admin.listGroups()).groups.some(g => g.groupId === groupId), false)
}

async function transactions(admin) {
  if (process.env.KAWA_TXN !== '1') {
    console.log('kafkajs: NOTE transactional producer skipped: the broker does not advertise the transaction APIs')
    return
  }
  step('transactional producer: commit and abort, sendOffsets')
  await admin.createTopics({ topics: [{ topic: 'kjs-txn', numPartitions: 1 }] })
  const producer = kafka.producer({ transactionalId: 'kjs-tx', idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  let txn = await producer.transaction()
  await txn.send({ topic: 'kjs-txn', messages: [{ value: 'committed-1' }, { value: 'committed-2' }] })
  await txn.sendOffsets({ consumerGroupId: 'kjs-txn-group', topics: [{ topic: 'kjs-txn', partitions: [{ partition: 0, offset: '2' }] }] })
  await txn.commit()
  txn = await producer.transaction()
  await txn.send({ topic: 'kjs-txn', messages: [{ value: 'aborted' }] })
  await txn.abort()
  await producer.disconnect()

  const offsets = await admin.fetchOffsets({ groupId: 'kjs-txn-group', topics: ['kjs-txn'] })
  assert.equal(offsets[0].partitions[0].offset, '2')

  const got = []
  const consumer = kafka.consumer({ groupId: 'kjs-txn-reader', maxWaitTimeInMs: 100, readUncommitted: false })
  await consumer.connect()
  await consumer.subscribe({ topics: ['kjs-txn'], fromBeginning: true })
  await consumer.run({ eachMessage: async ({ message }) => { got.push(message.value.toString()) } })
  await waitFor('committed transactional records', () => got.length >= 2)
  // The aborted record and both markers are never delivered; the high
  // watermark is past them (2 records + commit marker + 1 + abort marker).
  const hw = await admin.fetchTopicOffsets('kjs-txn')
  assert.equal(hw[0].high, '5')
  await consumer.disconnect()
  assert.deepEqual(got, ['committed-1', 'committed-2'])
}

async function main() {
  const admin = kafka.admin()
  await admin.connect()
  try {
    await adminTopics(admin)
    const produced = await producerAndOffsets(admin)
    await consumerGroup(admin, produced)
    await transactions(admin)
    step('deleteTopics')
    await admin.deleteTopics({ topics: ['kjs-admin'] })
    assert.equal((await admin.listTopics()).includes('kjs-admin'), false)
  } finally {
    await admin.disconnect()
  }
  console.log('kafkajs: ok')
}

main().catch(e => {
  console.error('kafkajs: FAILED:', e)
  process.exit(1)
})
