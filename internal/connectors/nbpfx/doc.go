// Package nbpfx is the adapter of the nbp-fx connector plugin: it syncs the
// mid exchange rates of Narodowy Bank Polski's table A (D-49).
//
// A Sync asks NBP's JSON API
// (GET {baseURL}/api/exchangerates/tables/A/{start}/{end}/?format=json) for
// the days after the watermark up to today in UTC, in ranges of at most 93
// days, the longest NBP answers. Every rate is delivered as an FxRate with
// base_currency the foreign currency, quote_currency PLN and rate NBP's mid
// rate for one unit, exactly as published: the JSON number is read as a
// json.Number and parsed as an exact decimal, never a float. The watermark
// is the effective date of the latest table delivered; a sync that finds no
// new table (NBP answers 404 "Brak danych") keeps the watermark it was given.
//
// NBP failing (transport errors, 5xx, any answer but 200 or a 404 "Brak
// danych") is connect.CodeUnavailable, so the core retries the batch; an
// answer it cannot read, or a watermark that is not a date, is
// connect.CodeInvalidArgument. ImportFile is connect.CodeUnimplemented.
//
// NBP is reached only through the *http.Client the plugin's main passes in,
// the SDK's egress client (D-63); tests pass an httptest client instead.
package nbpfx
