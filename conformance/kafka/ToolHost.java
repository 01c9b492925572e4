import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * Kafka's command-line tools run one after another in one JVM, each as its bin/ script would run
 * it in a JVM of its own: what it writes to stdout and stderr, and the status it exits with.
 *
 * <p>A test that runs tools by the dozen otherwise spends most of its CPU starting JVMs (about a
 * second each, with the class archive). The tools end through Kafka's {@link Exit}, which a host
 * may redirect (Kafka's own tool tests do): here an exit ends the command with its status and
 * parks the thread that called it for good, so nothing the tool would have done after exiting
 * happens. Log lines follow the redirected streams (the log4j2 configuration's {@code follow}).
 * One difference shows: a stack trace a tool prints has the host's frames below the tool's main.
 *
 * <p>Commands come on stdin, one a line, tab-separated: the seconds it may take, the tool's main
 * class, its arguments. Each answer on stdout is a line {@code EXIT <status> <bytes>} followed by
 * that many bytes of output (stdout then stderr, as a caller capturing both would join them). A
 * command still running after its seconds answers status -1 and is left behind.
 */
public final class ToolHost {
    /** The command a thread works for: tool threads and the threads they start inherit it. */
    private static final InheritableThreadLocal<CompletableFuture<Integer>> COMMAND = new InheritableThreadLocal<>();

    public static void main(String[] args) throws Exception {
        PrintStream answers = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        PrintStream stray = System.err;  // what a left-behind command writes between commands
        Exit.Procedure leave = (status, message) -> {
            CompletableFuture<Integer> command = COMMAND.get();
            if (command != null) {
                command.complete(status);
            }
            while (true) {
                LockSupport.park();
            }
        };
        Exit.setExitProcedure(leave);
        Exit.setHaltProcedure(leave);
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = commands.readLine()) != null; ) {
            String[] fields = line.split("\t", -1);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            int status = run(fields[1], Arrays.copyOfRange(fields, 2, fields.length), Integer.parseInt(fields[0]));
            System.out.flush();
            System.err.flush();
            System.setOut(stray);
            System.setErr(stray);
            out.write(err.toByteArray());
            answers.print("EXIT " + status + " " + out.size() + "\n");
            out.writeTo(answers);
            answers.flush();
        }
    }

    private static int run(String mainClass, String[] args, int seconds) {
        CompletableFuture<Integer> command = new CompletableFuture<>();
        Thread tool = new Thread(() -> {
            COMMAND.set(command);
            try {
                Method main = Class.forName(mainClass).getMethod("main", String[].class);
                main.invoke(null, (Object) args);
                command.complete(0);
            } catch (ReflectiveOperationException e) {
                uncaught(e instanceof InvocationTargetException thrown ? thrown.getCause() : e);
                command.complete(1);
            }
        }, "main");
        tool.setDaemon(true);
        tool.start();
        return command.completeOnTimeout(-1, seconds, TimeUnit.SECONDS).join();
    }

    /** As the JVM reports an exception that leaves main (and then exits with status 1). */
    private static void uncaught(Throwable thrown) {
        System.err.print("Exception in thread \"main\" ");
        thrown.printStackTrace();
    }
}
