// Java helpers for scripts/flink/keyed_windows.py (compiled on first use
// against the Flink jars that ship inside the `apache-flink` pip package).
//
// The job graph itself is built from Python through PyFlink's Java gateway;
// these classes are only the user functions Flink needs as JVM objects:
//   PartitionSource  one bounded source subtask per input partition
//   KeyOf            key selector (field f1 = integer key id)
//   Sum              ReduceFunction: sum of values (field f2)
//   EmitWindow       ProcessWindowFunction: (0, key, window end, sum)
//   LateRecord       late side output -> (1, key, ts, value)
//   drain            copies the collect() iterator to a file
package keel.flink;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.tuple.Tuple4;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.streaming.api.functions.source.legacy.RichParallelSourceFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

public final class KeelFlink {
    private KeelFlink() {}

    /** (ts, key id, value) */
    public static TypeInformation<Tuple3<Long, Long, Long>> eventType() {
        return Types.TUPLE(Types.LONG, Types.LONG, Types.LONG);
    }

    /** (kind, key id, a, b): kind 0/2 = fired window (a = window end, b = sum;
     *  2 = fired by the end-of-input MAX watermark);
     *  kind 1 = late record dropped by the window operator (a = ts, b = value). */
    public static TypeInformation<Tuple4<Integer, Long, Long, Long>> outType() {
        return Types.TUPLE(Types.INT, Types.LONG, Types.LONG, Types.LONG);
    }

    public static OutputTag<Tuple3<Long, Long, Long>> lateTag() {
        return new OutputTag<>("late", eventType());
    }

    // Factories, so the Python side need not spell nested class names.
    public static PartitionSource source(String dir, int partitions) { return new PartitionSource(dir, partitions); }
    public static KeyOf keyOf() { return new KeyOf(); }
    public static Sum sum() { return new Sum(); }
    public static EmitWindow emitWindow() { return new EmitWindow(); }
    public static LateRecord lateRecord() { return new LateRecord(); }

    /**
     * Subtask i reads exactly the file DIR/part-i.tsv ("ts key value" lines) in
     * file order and attaches ts as the record timestamp. The fixed
     * subtask -> partition mapping is what makes the watermark of each source
     * subtask depend on one partition only (a FLIP-27 FileSource hands splits
     * to whichever reader asks first, so a reader may read two partitions).
     */
    public static final class PartitionSource extends RichParallelSourceFunction<Tuple3<Long, Long, Long>>
            implements ResultTypeQueryable<Tuple3<Long, Long, Long>> {
        private static final long serialVersionUID = 1L;
        private final String dir;
        private final int partitions;
        private volatile boolean running = true;

        public PartitionSource(String dir, int partitions) {
            this.dir = dir;
            this.partitions = partitions;
        }

        @Override
        public void run(SourceContext<Tuple3<Long, Long, Long>> ctx) throws Exception {
            int idx = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            int n = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
            if (n != partitions) {
                throw new IllegalStateException("source parallelism " + n + " != partitions " + partitions);
            }
            try (BufferedReader r = Files.newBufferedReader(Paths.get(dir, "part-" + idx + ".tsv"), StandardCharsets.UTF_8)) {
                String line;
                while (running && (line = r.readLine()) != null) {
                    if (line.isEmpty()) continue;
                    String[] f = line.split(" ");
                    long ts = Long.parseLong(f[0]);
                    Tuple3<Long, Long, Long> ev = Tuple3.of(ts, Long.parseLong(f[1]), Long.parseLong(f[2]));
                    synchronized (ctx.getCheckpointLock()) {
                        ctx.collectWithTimestamp(ev, ts);
                    }
                }
            }
        }

        @Override
        public void cancel() {
            running = false;
        }

        @Override
        public TypeInformation<Tuple3<Long, Long, Long>> getProducedType() {
            return eventType();
        }
    }

    public static final class KeyOf implements KeySelector<Tuple3<Long, Long, Long>, Long> {
        private static final long serialVersionUID = 1L;
        @Override
        public Long getKey(Tuple3<Long, Long, Long> e) {
            return e.f1;
        }
    }

    public static final class Sum implements ReduceFunction<Tuple3<Long, Long, Long>> {
        private static final long serialVersionUID = 1L;
        @Override
        public Tuple3<Long, Long, Long> reduce(Tuple3<Long, Long, Long> a, Tuple3<Long, Long, Long> b) {
            return Tuple3.of(Math.max(a.f0, b.f0), a.f1, a.f2 + b.f2);
        }
    }

    public static final class EmitWindow
            extends ProcessWindowFunction<Tuple3<Long, Long, Long>, Tuple4<Integer, Long, Long, Long>, Long, TimeWindow> {
        private static final long serialVersionUID = 1L;
        @Override
        public void process(Long key, Context ctx, Iterable<Tuple3<Long, Long, Long>> sums,
                            Collector<Tuple4<Integer, Long, Long, Long>> out) {
            for (Tuple3<Long, Long, Long> s : sums) { // exactly one pre-reduced element
                // kind 0: fired by a regular watermark, 2: by the final (MAX) one
                int kind = ctx.currentWatermark() == Long.MAX_VALUE ? 2 : 0;
                out.collect(Tuple4.of(kind, key, ctx.window().getEnd(), s.f2));
            }
        }
    }

    public static final class LateRecord
            implements MapFunction<Tuple3<Long, Long, Long>, Tuple4<Integer, Long, Long, Long>> {
        private static final long serialVersionUID = 1L;
        @Override
        public Tuple4<Integer, Long, Long, Long> map(Tuple3<Long, Long, Long> e) {
            return Tuple4.of(1, e.f1, e.f0, e.f2);
        }
    }

    /** Writes every collected record as "kind key a b" and returns the count. */
    public static long drain(CloseableIterator<Tuple4<Integer, Long, Long, Long>> it, String path) throws Exception {
        long n = 0;
        try (BufferedWriter w = Files.newBufferedWriter(Paths.get(path), StandardCharsets.UTF_8)) {
            while (it.hasNext()) {
                Tuple4<Integer, Long, Long, Long> t = it.next();
                w.write(t.f0 + " " + t.f1 + " " + t.f2 + " " + t.f3 + "\n");
                n++;
            }
        } finally {
            it.close();
        }
        return n;
    }
}
