/*
 * The Iceberg REST catalog test server for tidemark's tests (test/harness/rest-catalog-server.ts,
 * docs/test-readers.md), run by `java -cp '.readers/rest-catalog/*' RestCatalogServer.java`.
 *
 * It is Iceberg's own server side of the protocol, the one Iceberg's RESTCatalogServer (the
 * apache/iceberg-rest-fixture image) serves: RESTCatalogAdapter, which applies a commit's
 * requirements and updates through CatalogHandlers, behind RESTCatalogServlet, over a JdbcCatalog
 * (SQLite in the warehouse folder) with HadoopFileIO writing the metadata files. This file only
 * wires them as RESTCatalogServer does, with two differences a test needs: Jetty listens on
 * 127.0.0.1 only (RESTCatalogServer binds every interface), and with REST_CATALOG_TOKEN set each
 * request must carry `Authorization: Bearer <token>` or is answered 401, as a secured catalog does.
 *
 * Arguments: <warehouse folder> <port>. Prints "ready <port>" on stdout once it listens.
 */
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.File;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public class RestCatalogServer {
  public static void main(String[] args) throws Exception {
    File warehouse = new File(args[0]).getAbsoluteFile();
    int port = Integer.parseInt(args[1]);
    String token = System.getenv("REST_CATALOG_TOKEN");
    if (!warehouse.isDirectory() && !warehouse.mkdirs()) throw new IllegalStateException("cannot create " + warehouse);

    Map<String, String> properties = new HashMap<>();
    properties.put("catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog");
    properties.put("uri", "jdbc:sqlite:" + new File(warehouse, "catalog.sqlite").getPath());
    properties.put("jdbc.schema-version", "V1");
    properties.put("warehouse", warehouse.toURI().toString());
    Catalog catalog = CatalogUtil.buildIcebergCatalog("rest_backend", properties, new Configuration());

    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))), "/*");
    if (token != null && !token.isEmpty()) {
      Filter bearer =
          (ServletRequest request, ServletResponse response, FilterChain chain) -> {
            String got = ((HttpServletRequest) request).getHeader("Authorization");
            if (("Bearer " + token).equals(got)) {
              chain.doFilter(request, response);
              return;
            }
            HttpServletResponse reply = (HttpServletResponse) response;
            reply.setStatus(401);
            reply.setContentType("application/json");
            reply
                .getWriter()
                .write(
                    "{\"error\":{\"message\":\"Not authorized: no valid bearer token\","
                        + "\"type\":\"NotAuthorizedException\",\"code\":401}}");
          };
      context.addFilter(new FilterHolder(bearer), "/*", EnumSet.of(jakarta.servlet.DispatcherType.REQUEST));
    }

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(port);
    server.addConnector(connector);
    server.setHandler(context);
    server.start();
    System.out.println("ready " + connector.getLocalPort());
    System.out.flush();
    server.join();
  }
}
