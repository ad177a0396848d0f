/**
 * The one thing signaling needs from the media layer (gateway/media): where callgate receives RTP
 * for a call. SDP answers are built from it; the media layer allocates and owns the port.
 */
export interface LocalMediaAddress {
  /** The address put in c= (the advertised address when callgate sits behind NAT). */
  readonly address: string;
  /** The even RTP port; RTCP is the port above it. */
  readonly port: number;
}
