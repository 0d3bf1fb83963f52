// Drives a running haystack-testserver with a third-party Haystack client:
// haystack-nclient 3.0.46 (ops: about, read, hisRead, hisWrite) and
// haystack-core 3.0.13 (the values written are made with it). Run by
// tests/nclient.rs:
//
//   node conformance.cjs <node_modules dir> <base URL>
//
// Every check compares what came back with what was written or with the
// clock; the first that fails ends the script with exit status 1 and says
// which. On success it prints one JSON line with what it saw.
'use strict'

const path = require('path')
const assert = require('assert/strict')

const [modules, base] = process.argv.slice(2)
if (!modules || !base) {
	console.error('usage: node conformance.cjs <node_modules dir> <base URL>')
	process.exit(2)
}
const core = require(path.join(modules, 'haystack-core'))
const nclient = require(path.join(modules, 'haystack-nclient'))

for (const [name, want] of [
	['haystack-core', '3.0.13'],
	['haystack-nclient', '3.0.46'],
]) {
	const got = require(path.join(modules, name, 'package.json')).version
	assert.equal(got, want, `${name} ${got} is installed, the test is written for ${want}`)
}

const HAYSON = 'application/vnd.haystack+json'

// What each request asked for and what the answer said it was.
const seen = []

/** A client whose ops go to <base>/api/<op> (Haxall's layout: no project). */
function makeClient(accept) {
	const fetch = async (resource, init) => {
		const resp = await globalThis.fetch(resource, init)
		const headers = new Headers(init && init.headers)
		seen.push({
			url: String(resource),
			accept: headers.get('accept'),
			contentType: resp.headers.get('content-type'),
		})
		return resp
	}
	return new nclient.Client({
		base: new URL(base),
		fetch,
		getOpUrl: ({ origin, op }) => `${origin}/api/${op}`,
		options: accept ? { headers: { accept } } : {},
	})
}

/** Epoch ms of a dateTime the client decoded (core 2 inside nclient, or core 3). */
function ms(v) {
	assert.ok(v && v.date instanceof Date, `not a dateTime: ${v}`)
	return v.date.getTime()
}

function rows(grid) {
	return grid.getRows()
}

async function run(client, label, ids, t0) {
	const out = { label }

	// about: a server that says what it is, with its clock in canonical UTC.
	const about = rows(await client.ops.about())[0]
	assert.equal(about.get('haystackVersion').value, '4.0', `${label}: about haystackVersion`)
	assert.equal(about.get('serverName').value, 'scalebench-haystack-testserver', `${label}: about serverName`)
	const serverTime = about.get('serverTime')
	assert.equal(serverTime.timezone, 'UTC', `${label}: serverTime tz`)
	assert.match(serverTime.value, /Z$/, `${label}: serverTime ${serverTime.value} is not written as Z (UTC)`)
	const skew = Math.abs(ms(serverTime) - Date.now())
	assert.ok(skew < 60_000, `${label}: serverTime ${serverTime.value} is ${skew} ms from this clock`)
	out.serverTime = serverTime.toZinc()

	// read by filter and by id: the records committed, with their tags.
	const points = rows(await client.ops.read('point and his and conformance'))
	assert.equal(points.length, 2, `${label}: read of the two points found ${points.length}`)
	const byId = rows(await client.ops.read([ids.temp, ids.state]))
	assert.equal(byId.length, 2, `${label}: read by id`)
	assert.equal(byId[0].get('id').value, ids.temp, `${label}: read by id keeps the order asked`)
	assert.equal(byId[0].get('unit').value, '°C', `${label}: the temperature point's unit`)
	assert.ok(byId[1].get('unit') == null, `${label}: the state point has no unit`)

	// hisWrite: three temperatures in °C, made with haystack-core 3.
	const written = [21.5, 22.25, -3.5].map((v, i) => ({
		ts: core.HDateTime.make(new Date(t0 + i * 1000)),
		val: core.HNum.make(v, '°C'),
	}))
	const wrote = await client.ops.hisWrite(
		ids.temp,
		written.map((d) => ({ ts: d.ts.toJSON(), val: d.val.toJSON() }))
	)
	assert.equal(wrote.getError(), undefined, `${label}: hisWrite answered an error`)

	// hisRead of [t0, t0 + 3 s): the same three readings, in order.
	const range = [core.HDateTime.make(new Date(t0)), core.HDateTime.make(new Date(t0 + 3000))]
	const his = await client.ops.hisRead(ids.temp, range.map((d) => d.toZinc()).join(','))
	const got = rows(his).map((r) => ({ ts: ms(r.get('ts')), val: r.get('val').value, tz: r.get('ts').timezone }))
	assert.deepEqual(
		got,
		written.map((d, i) => ({ ts: t0 + i * 1000, val: d.val.value, tz: 'UTC' })),
		`${label}: hisRead gave back other readings than were written`
	)
	for (const r of rows(his)) {
		assert.match(r.get('ts').value, /Z$/, `${label}: hisRead ts ${r.get('ts').value} is not written as Z (UTC)`)
	}
	assert.equal(his.meta.get('id').value, ids.temp, `${label}: hisRead meta id`)
	out.hisRead = got

	// A unit on a point without one is refused, and nothing of it is stored.
	let refused = null
	try {
		await client.ops.hisWrite(ids.state, [
			{ ts: core.HDateTime.make(new Date(t0)).toJSON(), val: core.HNum.make(1, '°C').toJSON() },
		])
	} catch (e) {
		refused = String(e.message)
	}
	assert.ok(refused, `${label}: hisWrite of 1°C to a point without a unit was accepted`)
	assert.match(refused, /unit/, `${label}: the refusal does not name the unit: ${refused}`)
	out.unitRefused = refused

	// A plain number on that point is stored and read back.
	await client.ops.hisWrite(ids.state, [
		{ ts: core.HDateTime.make(new Date(t0 + 500)).toJSON(), val: core.HNum.make(7).toJSON() },
	])
	const state = rows(await client.ops.hisRead(ids.state, range.map((d) => d.toZinc()).join(',')))
	assert.deepEqual(
		state.map((r) => [ms(r.get('ts')), r.get('val').value, r.get('val').unit ?? null]),
		[[t0 + 500, 7, null]],
		`${label}: hisRead of the unitless point`
	)
	return out
}

async function main() {
	const setup = makeClient()
	// Records, committed with the client's generic op call (commit is a
	// SkySpark/Haxall op, not one of the client's standard ops).
	const ids = { site: 'conf.site', temp: 'conf.temp', state: 'conf.state' }
	const commit = core.HGrid.make({
		meta: core.HDict.make({ commit: 'add' }),
		rows: [
			core.HDict.make({ id: core.HRef.make(ids.site), site: core.HMarker.make(), tz: 'UTC' }),
			core.HDict.make({
				id: core.HRef.make(ids.temp),
				point: core.HMarker.make(),
				his: core.HMarker.make(),
				conformance: core.HMarker.make(),
				kind: 'Number',
				unit: '°C',
				tz: 'UTC',
				siteRef: core.HRef.make(ids.site),
			}),
			core.HDict.make({
				id: core.HRef.make(ids.state),
				point: core.HMarker.make(),
				his: core.HMarker.make(),
				conformance: core.HMarker.make(),
				kind: 'Number',
				tz: 'UTC',
				siteRef: core.HRef.make(ids.site),
			}),
		],
	})
	const committed = await setup.ops.invokeOp('commit', commit)
	assert.equal(rows(committed).length, 3, 'commit answered the records it added')

	// Whole seconds an hour ago, so the hisRead ranges are exact.
	const t0 = Math.floor(Date.now() / 1000) * 1000 - 3_600_000
	const results = []
	// nclient's own Accept (Zinc first, then Hayson), then Hayson only, each
	// on its own history window.
	results.push(await run(setup, 'default accept', ids, t0))
	results.push(await run(makeClient(HAYSON), 'hayson accept', ids, t0 + 10_000))

	const hayson = seen.filter((s) => s.accept === HAYSON)
	assert.ok(hayson.length >= 5, `only ${hayson.length} requests asked for Hayson`)
	for (const s of hayson) {
		assert.ok(
			(s.contentType || '').startsWith(HAYSON),
			`${s.url} asked for ${HAYSON} and got ${s.contentType}`
		)
	}
	const other = seen.filter((s) => s.accept !== HAYSON)
	for (const s of other) {
		assert.ok((s.contentType || '').startsWith('text/zinc'), `${s.url} asked for ${s.accept}, got ${s.contentType}`)
	}
	console.log(JSON.stringify({ ok: true, requests: seen.length, results }))
}

main().catch((e) => {
	console.error(`conformance: ${e && e.stack ? e.stack : e}`)
	process.exit(1)
})
