// kafkajs 2.2.4 SASL against a Kawa SASL_PLAINTEXT listener: for each of
// PLAIN and SCRAM-SHA-512, the right password produces a record and a wrong
// one is refused with SASL_AUTHENTICATION_FAILED.
//
// Usage: node sasl.js <host:port> <user> <password>
'use strict'

const assert = require('node:assert/strict')
const { Kafka, logLevel } = require('kafkajs')

const [broker, username, password] = process.argv.slice(2)
if (!password) {
  console.error('usage: node sasl.js <host:port> <user> <password>')
  process.exit(2)
}

const client = (mechanism, pass) => new Kafka({
  clientId: 'kawa-sasl',
  brokers: [broker],
  sasl: { mechanism, username, password: pass },
  logLevel: process.env.KAFKAJS_LOG ? logLevel.DEBUG : logLevel.NOTHING,
  retry: { retries: 0 },
})

async function main () {
  for (const mechanism of ['plain', 'scram-sha-512']) {
    const producer = client(mechanism, password).producer({ allowAutoTopicCreation: true })
    await producer.connect()
    const [res] = await producer.send({ topic: 'kjs-sasl', acks: -1, messages: [{ value: mechanism }] })
    assert.equal(res.errorCode, 0)
    await producer.disconnect()
    console.log(`kafkajs: ${mechanism} login and produce ok`)

    const bad = client(mechanism, password + '-wrong').producer()
    await assert.rejects(bad.connect(), e => {
      assert.equal(e.name, 'KafkaJSSASLAuthenticationError', `${mechanism}: ${e.name}: ${e.message}`)
      return true
    })
    console.log(`kafkajs: ${mechanism} wrong password refused`)
  }
}

main().catch(e => { console.error(e); process.exit(1) })
