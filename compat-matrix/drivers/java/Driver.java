// The Java client (kafka-clients 3.9.1) behind the compatibility matrix's driver command
// line: produce, produce in transactions, read partitions, consume as a group (the classic
// protocol or KIP-848's), or create/describe/delete a topic.
//
// Records follow tests/support/records.py; consumed records are printed one JSON object
// per line; a failure exits 1 with one line on stderr.
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Driver {
    static final long BASE_TIMESTAMP_MS = 1_700_000_000_000L;

    public static void main(String[] argv) {
        Map<String, String> args = new HashMap<>(Map.of("codec", "none", "first", "0", "count", "0",
                "partitions", "1", "client-id", "kgate-compat", "timeout", "60"));
        args.putIfAbsent("transactional-id", "kgate-compat-tx");
        for (String arg : argv) {
            String[] pair = arg.replaceFirst("^--", "").split("=", 2);
            args.put(pair[0], pair.length == 2 ? pair[1] : "true");
        }
        try {
            switch (args.getOrDefault("mode", "")) {
                case "produce": produce(args); break;
                case "transact": transact(args); break;
                case "read": read(args); break;
                case "group": group(args); break;
                case "admin": admin(args); break;
                default: throw new IllegalArgumentException("unknown mode " + args.get("mode"));
            }
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            // One line with where it was thrown: the matrix keeps a failure's last lines only.
            StringBuilder where = new StringBuilder();
            StackTraceElement[] frames = cause.getStackTrace();
            for (int i = 0; i < Math.min(4, frames.length); i++) {
                where.append(i == 0 ? " at " : " < ").append(frames[i].getClassName().replaceAll(".*\\.", ""))
                        .append('.').append(frames[i].getMethodName()).append(':').append(frames[i].getLineNumber());
            }
            System.err.println(cause.getClass().getSimpleName() + ": " + cause.getMessage() + where);
            System.exit(1);
        }
        System.exit(0);
    }

    static Properties common(Map<String, String> args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args.get("brokers"));
        p.put("client.id", args.get("client-id"));
        String mechanism = args.getOrDefault("sasl-mechanism", "");
        if (!mechanism.isEmpty()) {
            String module = mechanism.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                    : "org.apache.kafka.common.security.scram.ScramLoginModule";
            p.put("security.protocol", "SASL_PLAINTEXT");
            p.put("sasl.mechanism", mechanism);
            p.put("sasl.jaas.config", module + " required username=\"" + args.get("sasl-user")
                    + "\" password=\"" + args.get("sasl-password") + "\";");
        }
        return p;
    }

    static long timeoutMs(Map<String, String> args) {
        return (long) (Double.parseDouble(args.get("timeout")) * 1000);
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String value(int i) {
        StringBuilder v = new StringBuilder("v" + i + "-");
        while (v.length() < 100) v.append('x');
        return v.toString();
    }

    static Properties producerConfig(Map<String, String> args) {
        Properties p = common(args);
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("compression.type", args.get("codec"));
        p.put("delivery.timeout.ms", String.valueOf(Math.max(timeoutMs(args), 30_000)));
        return p;
    }

    static KafkaProducer<byte[], byte[]> producer(Properties p) {
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** Send records first .. first+count-1, flush, and wait for each to be acknowledged. */
    static void send(KafkaProducer<byte[], byte[]> producer, Map<String, String> args, int first, int count)
            throws Exception {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = first; i < first + count; i++) {
            ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(args.get("topic"), null,
                    BASE_TIMESTAMP_MS + i, bytes("k" + i), bytes(value(i)));
            if (args.containsKey("headers")) {
                record.headers().add("idx", bytes(String.valueOf(i))).add("kind", bytes("test"));
            }
            sent.add(producer.send(record));
        }
        producer.flush();
        for (Future<RecordMetadata> future : sent) future.get(timeoutMs(args), TimeUnit.MILLISECONDS);
    }

    static void produce(Map<String, String> args) throws Exception {
        Properties p = producerConfig(args);
        p.put("enable.idempotence", String.valueOf(args.containsKey("idempotent")));
        try (KafkaProducer<byte[], byte[]> producer = producer(p)) {
            send(producer, args, Integer.parseInt(args.get("first")), Integer.parseInt(args.get("count")));
        }
    }

    /** Three transactions of one transactional id, a third of the records each: commit, abort, commit. */
    static void transact(Map<String, String> args) throws Exception {
        Properties p = producerConfig(args);
        p.put("transactional.id", args.get("transactional-id"));
        int first = Integer.parseInt(args.get("first"));
        int count = Integer.parseInt(args.get("count"));
        int third = count / 3;
        try (KafkaProducer<byte[], byte[]> producer = producer(p)) {
            producer.initTransactions();
            int[][] spans = {{first, third, 1}, {first + third, third, 0}, {first + 2 * third, count - 2 * third, 1}};
            for (int[] span : spans) {
                producer.beginTransaction();
                send(producer, args, span[0], span[1]);
                if (span[2] == 1) producer.commitTransaction(); else producer.abortTransaction();
            }
        }
    }

    static KafkaConsumer<byte[], byte[]> consumer(Map<String, String> args, String group) {
        Properties p = common(args);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        if (group != null) p.put("group.id", group);
        if (args.containsKey("isolation")) p.put("isolation.level", args.get("isolation"));
        if (args.containsKey("group-protocol")) p.put("group.protocol", args.get("group-protocol"));
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static void read(Map<String, String> args) {
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(args, null)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (int p = 0; p < Integer.parseInt(args.get("partitions")); p++) {
                partitions.add(new TopicPartition(args.get("topic"), p));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            consume(consumer, args);
        }
    }

    /** Read count records as a member of the group, commit exactly those, leave. */
    static void group(Map<String, String> args) {
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(args, args.get("group"))) {
            consumer.subscribe(List.of(args.get("topic")));
            Map<TopicPartition, OffsetAndMetadata> positions = consume(consumer, args);
            consumer.commitSync(positions);
        }
    }

    static Map<TopicPartition, OffsetAndMetadata> consume(KafkaConsumer<byte[], byte[]> consumer,
                                                          Map<String, String> args) {
        int count = Integer.parseInt(args.get("count"));
        long deadline = System.currentTimeMillis() + timeoutMs(args);
        Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
        int seen = 0;
        while (seen < count) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("read " + seen + " of " + count + " records");
            }
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                if (seen == count) {
                    break;
                }
                emit(r);
                positions.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                seen++;
            }
        }
        return positions;
    }

    static String quote(byte[] b) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : new String(b, StandardCharsets.UTF_8).toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        return out.append('"').toString();
    }

    static void emit(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder headers = new StringBuilder("[");
        for (Header h : r.headers()) {
            if (headers.length() > 1) headers.append(',');
            headers.append('[').append(quote(bytes(h.key()))).append(',').append(quote(h.value())).append(']');
        }
        System.out.println("{\"partition\":" + r.partition() + ",\"offset\":" + r.offset() + ",\"key\":"
                + quote(r.key()) + ",\"value\":" + quote(r.value()) + ",\"timestamp\":"
                + (r.timestamp() > 0 ? r.timestamp() : -1) + ",\"headers\":" + headers.append(']') + "}");
    }

    static void admin(Map<String, String> args) throws Exception {
        String topic = args.get("topic");
        long timeout = timeoutMs(args);
        try (Admin admin = Admin.create(common(args))) {
            admin.createTopics(List.of(new NewTopic(topic, Integer.parseInt(args.get("partitions")), (short) 1)))
                    .all().get(timeout, TimeUnit.MILLISECONDS);
            TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames()
                    .get(timeout, TimeUnit.MILLISECONDS).get(topic);
            System.out.println("{\"described_partitions\":" + described.partitions().size() + "}");
            admin.deleteTopics(List.of(topic)).all().get(timeout, TimeUnit.MILLISECONDS);
        }
    }
}
