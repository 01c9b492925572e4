// Sarama (Debian's 1.22, built offline) behind the compatibility matrix's driver command
// line: produce, read partitions, consume as a group, or create/describe/delete a topic.
//
// Records follow tests/support/records.py: key "k<i>", value "v<i>-" padded with 'x' to
// 100 bytes, create time BASE+i (magic 1 and up), with -headers idx=<i>, kind=test.
// Consumed records are printed one JSON object per line; a failure exits 1 with one line.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

const baseTimestampMs = 1700000000000

var versions = map[string]sarama.KafkaVersion{
	"V0_9_0_0": sarama.V0_9_0_0, "V0_10_0_0": sarama.V0_10_0_0, "V0_10_2_0": sarama.V0_10_2_0,
	"V1_0_0_0": sarama.V1_0_0_0, "V2_1_0_0": sarama.V2_1_0_0,
}

var codecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
	"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
}

type consumed struct {
	Partition int32       `json:"partition"`
	Offset    int64       `json:"offset"`
	Key       string      `json:"key"`
	Value     string      `json:"value"`
	Timestamp int64       `json:"timestamp"`
	Headers   [][2]string `json:"headers"`
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func value(i int) []byte {
	v := fmt.Sprintf("v%d-", i)
	return []byte(v + strings.Repeat("x", 100-len(v)))
}

func main() {
	mode := flag.String("mode", "", "produce, read, group or admin")
	brokers := flag.String("brokers", "", "bootstrap HOST:PORT")
	topic := flag.String("topic", "", "topic")
	version := flag.String("pin", "V0_10_2_0", "Sarama protocol version")
	codec := flag.String("codec", "none", "compression codec for produce")
	first := flag.Int("first", 0, "first record index to produce")
	count := flag.Int("count", 0, "records to produce or to read")
	partitions := flag.Int("partitions", 1, "partitions to read (mode read) or to create (mode admin)")
	group := flag.String("group", "", "consumer group (mode group)")
	headers := flag.Bool("headers", false, "give each record its headers")
	idempotent := flag.Bool("idempotent", false, "idempotent producer")
	mechanism := flag.String("sasl-mechanism", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (enables SASL)")
	user := flag.String("sasl-user", "", "SASL user")
	password := flag.String("sasl-password", "", "SASL password")
	clientID := flag.String("client-id", "kgate-compat", "client id")
	seconds := flag.Float64("timeout", 60, "give up after this many seconds")
	flag.Parse()
	timeout := time.Duration(*seconds * float64(time.Second))

	config := sarama.NewConfig()
	kafkaVersion, ok := versions[*version]
	if !ok {
		fail("unknown version %s", *version)
	}
	config.Version = kafkaVersion
	config.ClientID = *clientID
	config.Net.DialTimeout = timeout
	if *mechanism != "" {
		config.Net.SASL.Enable = true
		config.Net.SASL.Mechanism = sarama.SASLMechanism(*mechanism)
		config.Net.SASL.User = *user
		config.Net.SASL.Password = *password
		config.Net.SASL.Handshake = true
		if strings.HasPrefix(*mechanism, "SCRAM-") {
			config.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return newScramClient(*mechanism) }
		}
	}
	addrs := []string{*brokers}
	switch *mode {
	case "produce":
		if *idempotent {
			config.Producer.Idempotent = true
			config.Net.MaxOpenRequests = 1
		}
		produce(addrs, config, *topic, *codec, *first, *count, *headers)
	case "read":
		read(addrs, config, *topic, int32(*partitions), *count, timeout)
	case "group":
		consumeGroup(addrs, config, *topic, *group, *count, timeout)
	case "admin":
		admin(addrs, config, *topic, int32(*partitions))
	default:
		fail("unknown mode %q", *mode)
	}
}

func produce(addrs []string, config *sarama.Config, topic, codec string, first, count int, headers bool) {
	config.Producer.Return.Successes = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Producer.Partitioner = sarama.NewHashPartitioner
	compression, ok := codecs[codec]
	if !ok {
		fail("unknown codec %s", codec)
	}
	config.Producer.Compression = compression
	producer, err := sarama.NewSyncProducer(addrs, config)
	if err != nil {
		fail("producer: %v", err)
	}
	defer producer.Close()
	var messages []*sarama.ProducerMessage
	for i := first; i < first+count; i++ {
		message := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value: sarama.ByteEncoder(value(i)), Timestamp: time.Unix(0, int64(baseTimestampMs+i)*int64(time.Millisecond))}
		if headers {
			message.Headers = []sarama.RecordHeader{{Key: []byte("idx"), Value: []byte(fmt.Sprintf("%d", i))},
				{Key: []byte("kind"), Value: []byte("test")}}
		}
		messages = append(messages, message)
	}
	if err := producer.SendMessages(messages); err != nil {
		fail("produce: %v", err)
	}
}

func emit(encoder *json.Encoder, m *sarama.ConsumerMessage) {
	record := consumed{Partition: m.Partition, Offset: m.Offset, Key: string(m.Key), Value: string(m.Value),
		Timestamp: -1, Headers: [][2]string{}}
	if !m.Timestamp.IsZero() && m.Timestamp.UnixNano() > 0 {
		record.Timestamp = m.Timestamp.UnixNano() / int64(time.Millisecond)
	}
	for _, h := range m.Headers {
		record.Headers = append(record.Headers, [2]string{string(h.Key), string(h.Value)})
	}
	if err := encoder.Encode(record); err != nil {
		fail("output: %v", err)
	}
}

func read(addrs []string, config *sarama.Config, topic string, partitions int32, count int, timeout time.Duration) {
	consumer, err := sarama.NewConsumer(addrs, config)
	if err != nil {
		fail("consumer: %v", err)
	}
	defer consumer.Close()
	messages := make(chan *sarama.ConsumerMessage)
	for p := int32(0); p < partitions; p++ {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			fail("partition %d: %v", p, err)
		}
		defer pc.Close()
		go func(pc sarama.PartitionConsumer) {
			for m := range pc.Messages() {
				messages <- m
			}
		}(pc)
	}
	encoder := json.NewEncoder(os.Stdout)
	deadline := time.After(timeout)
	for seen := 0; seen < count; seen++ {
		select {
		case m := <-messages:
			emit(encoder, m)
		case <-deadline:
			fail("read %d of %d records", seen, count)
		}
	}
}

// handler prints and marks exactly “want“ records; claims run concurrently, one per partition.
type handler struct {
	encoder *json.Encoder
	want    int
	seen    int
	lock    sync.Mutex
	done    chan struct{}
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) take(session sarama.ConsumerGroupSession, m *sarama.ConsumerMessage) bool {
	h.lock.Lock()
	defer h.lock.Unlock()
	if h.seen >= h.want {
		return false
	}
	emit(h.encoder, m)
	session.MarkMessage(m, "")
	h.seen++
	if h.seen == h.want {
		close(h.done)
	}
	return true
}

func (h *handler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		if !h.take(session, m) {
			return nil
		}
	}
	return nil
}

func consumeGroup(addrs []string, config *sarama.Config, topic, group string, count int, timeout time.Duration) {
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Return.Errors = false
	consumerGroup, err := sarama.NewConsumerGroup(addrs, group, config)
	if err != nil {
		fail("group: %v", err)
	}
	h := &handler{encoder: json.NewEncoder(os.Stdout), want: count, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			if err := consumerGroup.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "consume: %v\n", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	select {
	case <-h.done:
	case <-time.After(timeout):
		cancel()
		fail("group read %d of %d records", h.seen, count)
	}
	cancel()
	// Close commits the marked offsets before leaving the group.
	if err := consumerGroup.Close(); err != nil {
		fail("close: %v", err)
	}
}

// admin creates the topic, describes it (printing its partition count) and deletes it.
func admin(addrs []string, config *sarama.Config, topic string, partitions int32) {
	clusterAdmin, err := sarama.NewClusterAdmin(addrs, config)
	if err != nil {
		fail("admin: %v", err)
	}
	defer clusterAdmin.Close()
	if err := clusterAdmin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1},
		false); err != nil {
		fail("create: %v", err)
	}
	described, err := clusterAdmin.DescribeTopics([]string{topic})
	if err != nil {
		fail("describe: %v", err)
	}
	if len(described) != 1 || described[0].Err != sarama.ErrNoError {
		fail("describe: %v", described)
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]int{"described_partitions": len(described[0].Partitions)}); err != nil {
		fail("output: %v", err)
	}
	if err := clusterAdmin.DeleteTopic(topic); err != nil {
		fail("delete: %v", err)
	}
}
