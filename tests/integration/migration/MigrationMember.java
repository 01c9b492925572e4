// A Java 4.4 consumer for tests/integration/test_group_migration.py:
//   MigrationMember BOOTSTRAP TOPIC GROUP PROTOCOL    PROTOCOL: classic or consumer (group.protocol)
// Prints "ASSIGNED p,p", "REVOKED p,p" (also for partitions lost) from its rebalance listener and
// "RECORD key" for each record; reads stdin and closes the consumer (leaving the group) at its end.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class MigrationMember {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[2]);
        props.put("group.protocol", args[3]);
        props.put("auto.offset.reset", "earliest");
        props.put("auto.commit.interval.ms", "500");
        if (args[3].equals("classic")) {
            props.put("session.timeout.ms", "10000");
            props.put("heartbeat.interval.ms", "1000");
        }
        AtomicBoolean stopping = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) { }
            } catch (Exception ignored) { }
            stopping.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(args[1]), new ConsumerRebalanceListener() {
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) { say("ASSIGNED", partitions); }
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) { say("REVOKED", partitions); }
                public void onPartitionsLost(Collection<TopicPartition> partitions) { say("REVOKED", partitions); }
            });
            long deadline = System.currentTimeMillis() + 600_000;
            while (!stopping.get() && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    System.out.println("RECORD " + record.key());
                }
                System.out.flush();
            }
        }
        System.out.println("DONE");
        System.out.flush();
    }

    static void say(String what, Collection<TopicPartition> partitions) {
        System.out.println(what + " " + partitions.stream().map(tp -> Integer.toString(tp.partition()))
            .collect(Collectors.joining(",")));
        System.out.flush();
    }
}
