// A Java 4.4 share-group client for tests/integration/test_share_groups.py; one mode per run.
//   setup BOOTSTRAP TOPIC GROUP LOCK_MS    topic of 2 partitions; the group's lock duration and earliest reset
//   produce BOOTSTRAP TOPIC COUNT          COUNT records, values 0..COUNT-1, acked before it exits
//   accept BOOTSTRAP TOPIC GROUP IDLE_MS   accept every record (explicit acknowledgement) until IDLE_MS pass
//                                          with none; prints "ACCEPTED value partition offset deliveryCount"
//   hold BOOTSTRAP TOPIC GROUP             acquire records and never acknowledge them: prints "HELD value ..."
//                                          once it holds some, then waits to be killed
// Every mode prints "READY" once it has polled (so joined) and ends its output with "DONE".
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public class ShareDriver {
    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2];
        switch (mode) {
            case "setup" -> setup(bootstrap, topic, args[3], args[4]);
            case "produce" -> produce(bootstrap, topic, Integer.parseInt(args[3]));
            case "accept" -> consume(bootstrap, topic, args[3], Long.parseLong(args[4]), false);
            case "hold" -> consume(bootstrap, topic, args[3], 0, true);
            default -> throw new IllegalArgumentException(mode);
        }
        System.out.println("DONE");
    }

    static void setup(String bootstrap, String topic, String group, String lockMs) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms", lockMs), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET))))
                .all().get();
        }
    }

    static void produce(String bootstrap, String topic, int count) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "all");
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            // One record a batch: a share fetch hands out whole batches where it can (Kafka does),
            // so small batches let the members share a partition's records.
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, i % 2, null, Integer.toString(i))).get();
            }
        }
    }

    static void consume(String bootstrap, String topic, String group, long idleMs, boolean hold) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("max.poll.records", "10");
        try (KafkaShareConsumer<String, String> consumer =
                 new KafkaShareConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            boolean ready = false;
            long idleSince = System.currentTimeMillis();
            long deadline = System.currentTimeMillis() + 120_000;
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (!ready) {
                    System.out.println("READY");
                    System.out.flush();
                    ready = true;
                }
                if (records.isEmpty()) {
                    if (!hold && System.currentTimeMillis() - idleSince > idleMs) break;
                    continue;
                }
                idleSince = System.currentTimeMillis();
                if (hold) {
                    for (ConsumerRecord<String, String> r : records) System.out.println("HELD " + describe(r));
                    System.out.flush();
                    Thread.sleep(deadline - System.currentTimeMillis());
                    break;
                }
                for (ConsumerRecord<String, String> r : records) consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                var results = consumer.commitSync(Duration.ofSeconds(30));
                for (ConsumerRecord<String, String> r : records) {
                    boolean failed = results.entrySet().stream().anyMatch(e -> e.getKey().topicPartition().partition()
                        == r.partition() && e.getValue().isPresent());
                    System.out.println((failed ? "FAILED " : "ACCEPTED ") + describe(r));
                }
                System.out.flush();
                Thread.sleep(20);  // a little work per batch, so the members share the records
            }
        }
    }

    static String describe(ConsumerRecord<String, String> r) {
        return r.value() + " " + r.partition() + " " + r.offset() + " " + r.deliveryCount().orElse((short) -1);
    }
}
