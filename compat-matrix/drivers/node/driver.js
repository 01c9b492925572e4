// kafkajs (1.x and 2.x; NODE_PATH picks the release) behind the compatibility matrix's
// driver command line: produce, produce in transactions, read, consume as a group, or
// create/describe/delete a topic.
//
// kafkajs has no consumer without a group, so "read" joins a group of its own and
// commits nothing; kafkajs reads committed records only unless --isolation=read_uncommitted.
// It has no KIP-848 consumer. Records follow tests/support/records.py; consumed records are printed
// one JSON object per line; a failure exits 1 with one line on stderr.
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const BASE_TIMESTAMP_MS = 1700000000000

function options (argv) {
  const out = { pin: '', codec: 'none', first: 0, count: 0, partitions: 1, group: '', headers: false,
    idempotent: false, 'sasl-mechanism': '', 'client-id': 'kgate-compat', timeout: 60,
    'transactional-id': 'kgate-compat-tx', isolation: '' }
  for (const arg of argv) {
    const [name, ...rest] = arg.replace(/^--/, '').split('=')
    out[name] = rest.length ? rest.join('=') : true
  }
  for (const name of ['first', 'count', 'partitions', 'timeout']) out[name] = Number(out[name])
  return out
}

function value (i) {
  return `v${i}-`.padEnd(100, 'x')
}

function client (args) {
  const config = { clientId: args['client-id'], brokers: [args.brokers], logLevel: logLevel.NOTHING,
    connectionTimeout: args.timeout * 1000, requestTimeout: args.timeout * 1000, retry: { retries: 3 } }
  if (args['sasl-mechanism']) {
    config.sasl = { mechanism: args['sasl-mechanism'].toLowerCase(), username: args['sasl-user'],
      password: args['sasl-password'] }
  }
  return new Kafka(config)
}

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4, zstd: CompressionTypes.ZSTD }

function messages (args, first, count) {
  const out = []
  for (let i = first; i < first + count; i++) {
    const message = { key: `k${i}`, value: value(i), timestamp: String(BASE_TIMESTAMP_MS + i) }
    if (args.headers) message.headers = { idx: String(i), kind: 'test' }
    out.push(message)
  }
  return out
}

async function produce (args) {
  const producer = client(args).producer({ idempotent: args.idempotent,
    maxInFlightRequests: args.idempotent ? 1 : undefined })
  await producer.connect()
  try {
    await producer.send({ topic: args.topic, messages: messages(args, args.first, args.count), acks: -1,
      compression: CODECS[args.codec] })
  } finally {
    await producer.disconnect()
  }
}

// Three transactions of one transactional id, a third of the records each: commit, abort, commit.
async function transact (args) {
  const producer = client(args).producer({ transactionalId: args['transactional-id'], idempotent: true,
    maxInFlightRequests: 1 })
  await producer.connect()
  try {
    const third = Math.floor(args.count / 3)
    const spans = [[args.first, third, true], [args.first + third, third, false],
      [args.first + 2 * third, args.count - 2 * third, true]]
    for (const [first, count, commit] of spans) {
      const transaction = await producer.transaction()
      await transaction.send({ topic: args.topic, messages: messages(args, first, count), acks: -1,
        compression: CODECS[args.codec] })
      await (commit ? transaction.commit() : transaction.abort())
    }
  } finally {
    await producer.disconnect()
  }
}

function emit (partition, message) {
  const timestamp = Number(message.timestamp)
  console.log(JSON.stringify({ partition, offset: Number(message.offset), key: message.key.toString(),
    value: message.value.toString(), timestamp: timestamp > 0 ? timestamp : -1,
    headers: Object.entries(message.headers || {}).map(([k, v]) => [k, v.toString()]) }))
}

// Read `count` records in `group`; with `commit`, commit exactly those before leaving.
async function consume (args, group, commit) {
  const consumer = client(args).consumer({ groupId: group, rebalanceTimeout: 10000, sessionTimeout: 10000,
    ...(args.isolation ? { readUncommitted: args.isolation === 'read_uncommitted' } : {}) })
  await consumer.connect()
  const positions = {}
  let seen = 0
  let finished
  const done = new Promise(resolve => { finished = resolve })
  try {
    await consumer.subscribe({ topic: args.topic, fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (seen >= args.count) return
        emit(partition, message)
        positions[partition] = Number(message.offset) + 1
        if (++seen === args.count) finished()
      }
    })
    const timer = setTimeout(finished, args.timeout * 1000)
    await done
    clearTimeout(timer)
    if (seen < args.count) throw new Error(`read ${seen} of ${args.count} records`)
    if (commit) {
      await consumer.commitOffsets(Object.entries(positions).map(([partition, offset]) =>
        ({ topic: args.topic, partition: Number(partition), offset: String(offset) })))
    }
  } finally {
    await consumer.disconnect()
  }
}

async function admin (args) {
  const kafkaAdmin = client(args).admin()
  await kafkaAdmin.connect()
  try {
    await kafkaAdmin.createTopics({ topics: [{ topic: args.topic, numPartitions: args.partitions,
      replicationFactor: 1 }], waitForLeaders: true })
    const described = await kafkaAdmin.fetchTopicMetadata({ topics: [args.topic] })
    console.log(JSON.stringify({ described_partitions: described.topics[0].partitions.length }))
    await kafkaAdmin.deleteTopics({ topics: [args.topic] })
  } finally {
    await kafkaAdmin.disconnect()
  }
}

const MODES = {
  produce,
  transact,
  read: args => consume(args, `${args['client-id']}-read-${process.pid}`, false),
  group: args => consume(args, args.group, true),
  admin
}

const args = options(process.argv.slice(2))
MODES[args.mode](args).then(() => process.exit(0), error => {
  process.stderr.write(`${error.name}: ${error.message}\n`)
  process.exit(1)
})
