// The Java client's idempotent acks=all producer that keeps producing while the server is
// killed and restarted: writes each acknowledged value to ACKED as it is acked, and exits
// 0 once all COUNT are acked (1 if any send failed). The same values, at about the same
// pace, as `tests/kafka/crash_producer.py`.
//   java -cp '.java-kafka/libs/*' cli/tests/kafka/java/JavaCrashProducer.java BOOTSTRAP TOPIC COUNT ACKED

import java.io.FileWriter;
import java.io.IOException;
import java.io.Writer;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaCrashProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        var props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("enable.idempotence", "true");
        props.put("acks", "all");
        props.put("linger.ms", "2");
        props.put("delivery.timeout.ms", "120000");
        props.put("reconnect.backoff.max.ms", "200");
        List<Exception> failed = new ArrayList<>();
        try (Writer acked = new FileWriter(args[3]);
                var producer = new KafkaProducer<String, String>(props)) {
            for (int i = 0; i < count; i++) {
                String value = "r-" + i;
                producer.send(new ProducerRecord<>(topic, Integer.toString(i % 13), value), (meta, error) -> {
                    synchronized (acked) {
                        if (error != null) {
                            failed.add(error);
                            return;
                        }
                        try {
                            acked.write(value + "\n");
                            acked.flush();
                        } catch (IOException e) {
                            failed.add(e);
                        }
                    }
                });
                // Paced like the Python producer, so the kill finds both mid-stream.
                if (i % 50 == 0) {
                    Thread.sleep(20);
                }
            }
            producer.flush();
        }
        if (!failed.isEmpty()) {
            System.err.println("failed sends: " + failed.size() + ", first: " + failed.get(0));
            System.exit(1);
        }
        System.out.println("acked " + count);
    }
}
