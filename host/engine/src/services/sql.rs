//! [`StackServices`]' SQL: one connection per (role, database service),
//! opened lazily and reopened once when it was closed; every statement
//! read-only, prepared unnamed and timed (see the module docs of
//! [`crate::services`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use plugin_runtime::types::{SqlRows, SqlValue};
use postgres::types::ToSql;

use super::pg_codec::{type_label, Cell, Param};
use super::{known, Conn, StackServices, Timing, DEFAULT_ROLE};
use crate::pg_connect::pg_error;

impl StackServices {
    fn connect(&self, service: &str) -> Result<postgres::Client, String> {
        let mut cfg = self.databases[service].clone();
        if cfg.config.get_connect_timeout().is_none() {
            cfg.config.connect_timeout(self.timeout);
        }
        let mut client = cfg.connect().map_err(|e| format!("cannot connect to database service `{service}`: {e}"))?;
        client
            .batch_execute(&format!(
                "SET statement_timeout = {}; SET default_transaction_read_only = on",
                self.timeout.as_millis().max(1)
            ))
            .map_err(|e| format!("database service `{service}`: cannot set statement_timeout: {}", pg_error(&e)))?;
        Ok(client)
    }

    fn conn_for<'a>(&'a self, map: &'a HashMap<String, Conn>, service: &str) -> Result<&'a Conn, String> {
        map.get(service).ok_or_else(|| {
            format!(
                "unknown database service `{service}`; this run's database services are: {}",
                known(self.databases.keys())
            )
        })
    }

    /// Run `f` on the service's connection: open it if needed, and when it
    /// fails because the connection is closed, reconnect once and run it again.
    /// The duration is `f`'s own, on the attempt that counted.
    fn with_conn<T>(
        &self,
        slot: &Conn,
        service: &str,
        mut f: impl FnMut(&mut postgres::Client) -> Result<(T, Duration), postgres::Error>,
    ) -> Result<(T, Duration), String> {
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        let mut reconnected = false;
        loop {
            if guard.as_ref().is_none_or(|c| c.is_closed()) {
                *guard = None;
                *guard = Some(self.connect(service)?);
            }
            let client = guard.as_mut().expect("connected above");
            match f(client) {
                Ok(v) => return Ok(v),
                Err(e) if (e.is_closed() || client.is_closed()) && !reconnected => {
                    reconnected = true;
                    *guard = None;
                }
                Err(e) => return Err(pg_error(&e)),
            }
        }
    }

    /// The connection of `role` to `service`, made on first use.
    fn role_conn(&self, role: &str, service: &str) -> Result<std::sync::Arc<Conn>, String> {
        self.conn_for(&self.ping_conns, service)?;
        let mut map = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.entry(format!("{role}/{service}")).or_insert_with(|| std::sync::Arc::new(Mutex::new(None))).clone())
    }

    /// Close `role`'s connections to every database service; its next
    /// request opens a new one. A connection busy with a request (a probe
    /// run given up at its deadline, still waiting on a frozen server) is
    /// left to that request.
    pub fn close_role(&self, role: &str) {
        let prefix = format!("{role}/");
        let mut clients: Vec<postgres::Client> = Vec::new();
        self.conns.lock().unwrap_or_else(|p| p.into_inner()).retain(|k, slot| {
            if !k.starts_with(&prefix) {
                return true;
            }
            // Busy: kept for the request that holds it.
            let Ok(mut c) = slot.try_lock() else { return true };
            clients.extend(c.take());
            false
        });
        super::close_on_a_plain_thread(clients);
    }

    /// Run `statement` with `params` on database service `database`, timed,
    /// on the default role's connection.
    pub fn timed_sql(
        &self,
        plugin: &str,
        database: &str,
        statement: &str,
        params: &[SqlValue],
    ) -> (Result<SqlRows, String>, Option<Duration>) {
        self.timed_sql_as(DEFAULT_ROLE, plugin, database, statement, params)
    }

    /// Run `statement` with `params` on database service `database`, timed,
    /// read-only, on `role`'s own connection. The duration runs from the call
    /// to the last row (connection wait, BEGIN, prepare and query); it is
    /// `None` when the request never ran (unknown service, no connection).
    pub fn timed_sql_as(
        &self,
        role: &str,
        plugin: &str,
        database: &str,
        statement: &str,
        params: &[SqlValue],
    ) -> (Result<SqlRows, String>, Option<Duration>) {
        // Timed from the moment it is asked: the wait for the role's
        // connection (another request on it, a reconnect), BEGIN, prepare
        // and query all count, as a client of the SUT would wait them.
        let asked = Instant::now();
        let binds: Vec<Param> = params.iter().map(Param).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = binds.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let r = self.role_conn(role, database).and_then(|slot| {
            self.with_conn(&slot, database, |c| {
                let mut tx = c.build_transaction().read_only(true).start()?;
                let stmt = tx.prepare(statement)?;
                let rows = tx.query(&stmt, &refs)?;
                let took = asked.elapsed();
                let converted = convert_rows(&stmt, &rows);
                tx.rollback()?;
                Ok((converted, took))
            })
        });
        let what: String = statement.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(80).collect();
        match r {
            Ok((converted, d)) => {
                let ok = converted.is_ok();
                self.record(plugin, Timing { kind: "sql", service: database.into(), what, duration: d, ok });
                (converted, Some(d))
            }
            Err(e) => {
                if self.databases.contains_key(database) {
                    self.record(
                        plugin,
                        Timing { kind: "sql", service: database.into(), what, duration: Duration::ZERO, ok: false },
                    );
                }
                (Err(e), None)
            }
        }
    }

    /// `SELECT 1` on database service `service`, timed, on a connection of its own.
    pub fn pg_roundtrip(&self, service: &str) -> anyhow::Result<Duration> {
        let slot = self.conn_for(&self.ping_conns, service).map_err(|e| anyhow!(e))?;
        let ((), d) = self
            .with_conn(slot, service, |c| {
                let t0 = Instant::now();
                c.simple_query("SELECT 1")?;
                Ok(((), t0.elapsed()))
            })
            .map_err(|e| anyhow!("SELECT 1 on database service `{service}`: {e}"))?;
        Ok(d)
    }
}

fn convert_rows(stmt: &postgres::Statement, rows: &[postgres::Row]) -> Result<SqlRows, String> {
    let columns: Vec<String> = stmt.columns().iter().map(|c| c.name().to_string()).collect();
    let mut out = Vec::with_capacity(rows.len());
    for (ri, row) in rows.iter().enumerate() {
        let mut vals = Vec::with_capacity(columns.len());
        for (ci, col) in stmt.columns().iter().enumerate() {
            match row.try_get::<_, Cell>(ci) {
                Ok(Cell::Value(v)) => vals.push(v),
                Ok(Cell::Unsupported(t)) => {
                    return Err(format!(
                        "column `{}` has type {t}, which the host does not convert; cast it in the statement, e.g. `{}::text` \
                         (converted: int2/4/8, oid, float4/8, numeric, bool, text-like, json/jsonb, timestamp[tz], date, uuid, bytea)",
                        col.name(),
                        col.name()
                    ))
                }
                Err(e) => return Err(format!("row {ri}, column `{}` ({}): {}", col.name(), type_label(col.type_()), pg_error(&e))),
            }
        }
        out.push(vals);
    }
    Ok(SqlRows { columns, rows: out })
}
