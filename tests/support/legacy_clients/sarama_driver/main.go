// Sarama (1.22, Debian's golang-github-shopify-sarama-dev) driven by kgate's tests.
//
//	sarama_driver produce|consume|group-consume -brokers HOST:PORT -topic T -version V0_9_0_0 [flags]
//
// Records follow tests/support/records.py: key "k<i>", value "v<i>-" padded with 'x' to
// 100 bytes, create time BASE+i (magic 1 and up), headers idx=<i>, kind=test (magic 2).
// produce prints {"index","partition","offset"} per record; the consumers print one
// consumed record per line. group-consume commits exactly the records it printed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
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

var out = json.NewEncoder(os.Stdout)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: %s produce|consume|group-consume [flags]", os.Args[0])
	}
	command := os.Args[1]
	flags := flag.NewFlagSet(command, flag.ExitOnError)
	brokers := flags.String("brokers", "", "bootstrap HOST:PORT")
	topic := flags.String("topic", "", "topic")
	version := flags.String("version", "V0_10_2_0", "Kafka version Sarama speaks")
	codec := flags.String("codec", "none", "compression codec (produce)")
	count := flags.Int("count", 0, "records to produce or to read")
	partitions := flags.Int("partitions", 1, "partitions to read (consume)")
	group := flags.String("group", "", "consumer group (group-consume)")
	mechanism := flags.String("sasl-mechanism", "", "SASL mechanism (PLAIN); enables SASL")
	user := flags.String("user", "", "SASL user")
	password := flags.String("password", "", "SASL password")
	timeout := flags.Duration("timeout", 60*time.Second, "give up after this long")
	flags.Parse(os.Args[2:])

	config := sarama.NewConfig()
	kafkaVersion, ok := versions[*version]
	if !ok {
		fail("unknown version %s", *version)
	}
	config.Version = kafkaVersion
	config.ClientID = "sarama-driver"
	if *mechanism != "" {
		// PLAIN: handshake v0 and raw tokens below V1_0_0_0, handshake v1 + SaslAuthenticate from it.
		config.Net.SASL.Enable = true
		config.Net.SASL.Mechanism = sarama.SASLMechanism(*mechanism)
		config.Net.SASL.User = *user
		config.Net.SASL.Password = *password
	}
	// Wait for the timeout, however slowly the test machine runs.
	go func() {
		time.Sleep(*timeout)
		fail("%s did not finish within %s", command, *timeout)
	}()
	addrs := []string{*brokers}
	switch command {
	case "produce":
		produce(addrs, config, *topic, *codec, *count)
	case "consume":
		consume(addrs, config, *topic, int32(*partitions), *count)
	case "group-consume":
		groupConsume(addrs, config, *topic, *group, *count)
	default:
		fail("unknown command %q", command)
	}
}

func produce(addrs []string, config *sarama.Config, topic, codec string, count int) {
	config.Producer.Return.Successes = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Producer.Retry.Max = 0
	compression, ok := codecs[codec]
	if !ok {
		fail("unknown codec %s", codec)
	}
	config.Producer.Compression = compression
	producer, err := sarama.NewSyncProducer(addrs, config)
	if err != nil {
		fail("producer: %v", err)
	}
	messages := make([]*sarama.ProducerMessage, count)
	for i := range messages {
		v := fmt.Sprintf("v%d-", i)
		messages[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value:     sarama.StringEncoder(v + strings.Repeat("x", 100-len(v))),
			Timestamp: time.Unix(0, (baseTimestampMs+int64(i))*int64(time.Millisecond)),
		}
		if config.Version.IsAtLeast(sarama.V0_11_0_0) { // Sarama refuses headers below
			messages[i].Headers = []sarama.RecordHeader{{Key: []byte("idx"), Value: []byte(strconv.Itoa(i))},
				{Key: []byte("kind"), Value: []byte("test")}}
		}
	}
	if err := producer.SendMessages(messages); err != nil {
		if errs, ok := err.(sarama.ProducerErrors); ok && len(errs) > 0 {
			fail("produce: %d of %d failed, first: %v", len(errs), count, errs[0].Err)
		}
		fail("produce: %v", err)
	}
	for i, m := range messages {
		out.Encode(map[string]interface{}{"index": i, "partition": m.Partition, "offset": m.Offset})
	}
	if err := producer.Close(); err != nil {
		fail("close: %v", err)
	}
}

func emit(m *sarama.ConsumerMessage) {
	timestamp := int64(-1)
	if m.Timestamp.UnixNano() > 0 {
		timestamp = m.Timestamp.UnixNano() / int64(time.Millisecond)
	}
	headers := [][2]string{}
	for _, h := range m.Headers {
		headers = append(headers, [2]string{string(h.Key), string(h.Value)})
	}
	out.Encode(map[string]interface{}{"partition": m.Partition, "offset": m.Offset, "key": string(m.Key),
		"value": string(m.Value), "timestamp": timestamp, "headers": headers})
}

func consume(addrs []string, config *sarama.Config, topic string, partitions int32, count int) {
	consumer, err := sarama.NewConsumer(addrs, config)
	if err != nil {
		fail("consumer: %v", err)
	}
	messages := make(chan *sarama.ConsumerMessage)
	for p := int32(0); p < partitions; p++ {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			fail("partition %d: %v", p, err)
		}
		go func() {
			for m := range pc.Messages() {
				messages <- m
			}
		}()
		go func() {
			for err := range pc.Errors() {
				fail("partition %d: %v", err.Partition, err.Err)
			}
		}()
	}
	for seen := 0; seen < count; seen++ {
		emit(<-messages)
	}
}

// taker prints and marks exactly “want“ records over the claims, which run concurrently.
type taker struct {
	want, seen int
	lock       sync.Mutex
	done       chan struct{}
}

func (t *taker) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (t *taker) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (t *taker) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		t.lock.Lock()
		if t.seen < t.want {
			emit(m)
			session.MarkMessage(m, "")
			t.seen++
			if t.seen == t.want {
				close(t.done)
			}
		}
		t.lock.Unlock()
	}
	return nil
}

func groupConsume(addrs []string, config *sarama.Config, topic, group string, count int) {
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Return.Errors = true
	consumerGroup, err := sarama.NewConsumerGroup(addrs, group, config)
	if err != nil {
		fail("group: %v", err)
	}
	go func() {
		for err := range consumerGroup.Errors() {
			fmt.Fprintf(os.Stderr, "group error: %v\n", err)
		}
	}()
	t := &taker{want: count, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	consuming := make(chan struct{})
	go func() {
		defer close(consuming)
		for ctx.Err() == nil {
			if err := consumerGroup.Consume(ctx, []string{topic}, t); err != nil {
				fail("consume: %v", err)
			}
		}
	}()
	<-t.done
	// Ending the session commits the marked offsets; Close then leaves the group.
	cancel()
	<-consuming
	if err := consumerGroup.Close(); err != nil {
		fail("close: %v", err)
	}
}
