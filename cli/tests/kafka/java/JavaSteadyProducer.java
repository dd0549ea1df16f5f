// The Java client's idempotent acks=all producer at a steady rate, through a server
// being killed, as `tests/kafka/steady_producer.py` is librdkafka's: sends COUNT
// values `NAME-i` (key i % 13, so each key stays on one partition) at RATE per second,
// writes each acknowledged one to ACKED as `partition offset value`, and exits 0 once
// all are acked (1 if any send failed).
//   java -cp '.java-kafka/libs/*' cli/tests/kafka/java/JavaSteadyProducer.java BOOTSTRAP TOPIC NAME RATE COUNT ACKED

import java.io.FileWriter;
import java.io.IOException;
import java.io.Writer;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaSteadyProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String name = args[2];
        double rate = Double.parseDouble(args[3]);
        int count = Integer.parseInt(args[4]);
        var props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("enable.idempotence", "true");
        props.put("acks", "all");
        props.put("linger.ms", "5");
        props.put("delivery.timeout.ms", "120000");
        props.put("reconnect.backoff.max.ms", "200");
        List<String> failed = new ArrayList<>();
        try (Writer acked = new FileWriter(args[5]);
                var producer = new KafkaProducer<String, String>(props)) {
            long start = System.nanoTime();
            for (int i = 0; i < count; i++) {
                // Paced: record i goes out at start + i / RATE.
                long due = start + (long) (i * 1e9 / rate);
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
                String value = name + "-" + i;
                producer.send(new ProducerRecord<>(topic, Integer.toString(i % 13), value), (meta, error) -> {
                    synchronized (acked) {
                        if (error != null) {
                            failed.add(error.toString());
                            return;
                        }
                        try {
                            acked.write(meta.partition() + " " + meta.offset() + " " + value + "\n");
                            acked.flush();
                        } catch (IOException e) {
                            failed.add(e.toString());
                        }
                    }
                });
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
