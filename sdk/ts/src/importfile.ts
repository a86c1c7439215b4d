// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { Code, ConnectError } from "@connectrpc/connect";
import {
  IngestMode,
  type FileHeader,
  type ImportFileRequest,
} from "./gen/openfief/connector/v1/connector_pb.js";

/** A statement file received over ImportFile: its header and all of its bytes. */
export interface ReceivedFile {
  /** The FileHeader the stream opened with. */
  readonly header: FileHeader;
  /** The file's bytes, every chunk in order. */
  readonly content: Uint8Array;
}

/** The message of the error receiveFile throws for a file over its limit. */
export const FILE_TOO_LARGE = "file exceeds the connector's size limit";

/**
 * Reads a whole ImportFile stream: exactly one FileHeader first, with a batch
 * ID and a known ingest mode, then chunks of at most limit bytes in all. A
 * missing, repeated or late header is a ConnectError with
 * Code.InvalidArgument, a larger file one with Code.ResourceExhausted, so a
 * connector can throw the error as it is.
 */
export async function receiveFile(
  requests: AsyncIterable<ImportFileRequest>,
  limit: number,
): Promise<ReceivedFile> {
  if (!(limit > 0)) {
    throw new ConnectError("receiveFile: the size limit must be positive", Code.Internal);
  }
  let header: FileHeader | undefined;
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const req of requests) {
    const m = req.message;
    switch (m.case) {
      case "header":
        if (header !== undefined) throw invalidArgument("a second file header");
        checkFileHeader(m.value);
        header = m.value;
        break;
      case "chunk":
        if (header === undefined) throw invalidArgument("a chunk before the file header");
        if (m.value.length > limit - size) {
          throw new ConnectError(`${FILE_TOO_LARGE} of ${limit} bytes`, Code.ResourceExhausted);
        }
        chunks.push(m.value);
        size += m.value.length;
        break;
      default:
        throw invalidArgument("a message with neither header nor chunk");
    }
  }
  if (header === undefined) throw invalidArgument("no file header");
  const content = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    content.set(c, at);
    at += c.length;
  }
  return { header, content };
}

function checkFileHeader(h: FileHeader): void {
  if (h.batchId === "") throw invalidArgument("file header: no batch_id");
  if (IngestMode[h.mode] === undefined) {
    throw invalidArgument(`file header: unknown ingest mode ${h.mode}`);
  }
}

function invalidArgument(msg: string): ConnectError {
  return new ConnectError("ImportFile stream: " + msg, Code.InvalidArgument);
}
