// Apache Flink 2.0 with its Kafka connector (4.0, on kafka-clients 3.9) against
// `shale serve --kafka`: a job on a local Flink cluster reads a topic of two partitions
// with a bounded KafkaSource and writes every record to another topic with an exactly-once
// KafkaSink (a transaction per checkpoint, committed when the checkpoint completes). Every
// step asserted: read_committed sees each record once, the sink's transactions are listed
// by the admin client, and the offsets the source committed lie within their partitions.
//
// The job has no function of its own (no map, no lambda): the launcher compiles this file
// in memory, where Flink's task threads, which load user classes by name, cannot see it.
//
//   java -cp '.java-kafka/flink/*' cli/tests/kafka/java/FlinkPipeline.java HOST:PORT

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class FlinkPipeline {
    static final int RECORDS = 1000;

    /** Exits when done, pass or fail: the cluster's threads would keep the JVM up. */
    public static void main(String[] args) {
        try {
            run(args[0]);
            System.exit(0);
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
    }

    static void run(String bootstrap) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic("flink-in", 2, (short) 1), new NewTopic("flink-out", 1, (short) 1)))
                    .all().get();
            var props = new Properties();
            props.put("bootstrap.servers", bootstrap);
            props.put("key.serializer", StringSerializer.class.getName());
            props.put("value.serializer", StringSerializer.class.getName());
            try (var producer = new KafkaProducer<String, String>(props)) {
                var sends = new java.util.ArrayList<java.util.concurrent.Future<?>>();
                for (int i = 0; i < RECORDS; i++) {
                    sends.add(producer.send(new ProducerRecord<>("flink-in", "k" + i, "v" + i)));
                }
                for (var send : sends) {
                    send.get();
                }
            }
            step(RECORDS + " records produced to flink-in");

            long runtime = runJob(bootstrap);
            step("the job read flink-in to its end and finished in " + runtime + " ms");

            checkOutput(bootstrap);
            step("read_committed sees each record once in flink-out");
            var transactions = admin.listTransactions().all().get().stream()
                    .map(t -> t.transactionalId()).filter(id -> id.startsWith("flink-copy")).toList();
            check(!transactions.isEmpty(), "the sink wrote through transactions of its prefix");
            // The source commits its group's offsets when a checkpoint completes, from its
            // fetcher thread and without waiting; the last such commit may not be sent before
            // a bounded job's reader closes (Flink keeps its positions in its checkpoints, the
            // committed offsets are for monitoring). So each one committed is checked to lie
            // within the partition, not to be at its end.
            var committed = admin.listConsumerGroupOffsets("flink-copy").partitionsToOffsetAndMetadata().get();
            long total = 0;
            for (int p = 0; p < 2; p++) {
                var tp = new TopicPartition("flink-in", p);
                long end = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp).offset();
                var offset = committed.get(tp);
                check(offset == null || (offset.offset() >= 0 && offset.offset() <= end),
                        "the source's offset of " + tp + " within it: " + offset + " of " + end);
                total += end;
            }
            check(total == RECORDS, "the two partitions hold every record: " + total);
            step("the sink's transactions listed; the source's committed offsets within their partitions");
        }
        System.out.println("every step passed");
    }

    /** flink-in to flink-out, exactly once, on a local cluster; the job's runtime. */
    static long runJob(String bootstrap) throws Exception {
        var conf = new Configuration();
        conf.setString("restart-strategy.type", "none");
        var env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.enableCheckpointing(500);
        env.setParallelism(2);
        KafkaSource<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(bootstrap)
                .setTopics("flink-in")
                .setGroupId("flink-copy")
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setBounded(OffsetsInitializer.latest())
                .setValueOnlyDeserializer(new SimpleStringSchema())
                .build();
        KafkaSink<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(bootstrap)
                .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                        .setTopic("flink-out")
                        .setValueSerializationSchema(new SimpleStringSchema())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix("flink-copy")
                .setProperty("transaction.timeout.ms", "60000")
                .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "flink-in").sinkTo(sink);
        var job = env.getStreamGraph().getJobGraph();
        var cluster = new MiniClusterConfiguration.Builder().setNumTaskManagers(1).setNumSlotsPerTaskManager(4).build();
        try (var mini = new MiniCluster(cluster)) {
            mini.start();
            return mini.executeJobBlocking(job).getNetRuntime();
        }
    }

    static void checkOutput(String bootstrap) {
        var props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("isolation.level", "read_committed");
        try (var consumer = new KafkaConsumer<String, String>(props)) {
            var tp = new TopicPartition("flink-out", 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            Set<String> values = new HashSet<>();
            int read = 0;
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (consumer.position(tp) < end) {
                check(System.nanoTime() < deadline, "flink-out not read to its end " + end);
                for (var record : consumer.poll(Duration.ofMillis(200))) {
                    values.add(record.value());
                    read++;
                }
            }
            check(read == RECORDS && values.size() == RECORDS, "each record once: " + read + " read, "
                    + values.size() + " distinct");
            for (int i = 0; i < RECORDS; i++) {
                check(values.contains("v" + i), "v" + i + " copied");
            }
        }
    }

    static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }

    static void step(String what) {
        System.out.println("ok: " + what);
    }
}
