package fakegemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// uploadPath is where the Files API's resumable upload starts, and where
// its upload URL points (with an upload_id); outside /v1beta/, as the SDK's
// Files.Upload sends it (GEMINI.md §13).
const uploadPath = "/upload/v1beta/files"

// maxUploadChunk bounds one upload request: the SDK sends 8 MiB chunks.
const maxUploadChunk = 9 << 20

// maxFileBytes bounds what the fake keeps of one file.
const maxFileBytes = 64 << 20

// storedFile is a file uploaded through the Files API.
type storedFile struct {
	name, displayName, mimeType string
	data                        []byte
	created                     time.Time
}

// upload is a resumable upload in progress.
type upload struct {
	file storedFile
	data bytes.Buffer
}

// File returns the content of files/{id} as uploaded, so a test can check
// what a client sent.
func (s *Server) File(name string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[strings.TrimPrefix(name, "files/")]
	if !ok {
		return nil, false
	}
	return bytes.Clone(f.data), true
}

// upload answers both steps of the resumable protocol the SDK speaks:
// "start" (no upload_id: answer the upload URL in X-Goog-Upload-Url) and
// "upload[, finalize]" at that URL (append the chunk at its offset; on
// finalize store the file and answer {"file": …} with
// X-Goog-Upload-Status: final).
func (s *Server) upload(r *http.Request, body []byte) response {
	if r.Method != http.MethodPost {
		return methodNotAllowed()
	}
	cmd := strings.ToLower(r.Header.Get("X-Goog-Upload-Command"))
	id := r.URL.Query().Get("upload_id")
	if id == "" {
		if r.Header.Get("X-Goog-Upload-Protocol") != "resumable" || cmd != "start" {
			return badRequest("fakegemini: only resumable uploads are served (X-Goog-Upload-Protocol: resumable, X-Goog-Upload-Command: start)")
		}
		return s.startUpload(r, body)
	}
	up, ok := s.uploads[id]
	if !ok {
		return notFound()
	}
	if off, err := strconv.Atoi(r.Header.Get("X-Goog-Upload-Offset")); err != nil || off != up.data.Len() {
		return badRequest(fmt.Sprintf("fakegemini: upload offset %q, want %d", r.Header.Get("X-Goog-Upload-Offset"), up.data.Len()))
	}
	if up.data.Len()+len(body) > maxFileBytes {
		delete(s.uploads, id)
		return errorResponse(http.StatusRequestEntityTooLarge, "fakegemini: file over its limit", "INVALID_ARGUMENT")
	}
	up.data.Write(body)
	parts := strings.Split(cmd, ",")
	finalize := false
	for _, p := range parts {
		switch strings.TrimSpace(p) {
		case "upload":
		case "finalize":
			finalize = true
		default:
			return badRequest("fakegemini: unknown X-Goog-Upload-Command " + strconv.Quote(cmd))
		}
	}
	if !finalize {
		resp := jsonResponse(http.StatusOK, struct{}{})
		resp.header = http.Header{"X-Goog-Upload-Status": {"active"}}
		return resp
	}
	delete(s.uploads, id)
	f := up.file
	f.data = bytes.Clone(up.data.Bytes())
	s.files[strings.TrimPrefix(f.name, "files/")] = &f
	resp := jsonResponse(http.StatusOK, struct {
		File fileJSON `json:"file"`
	}{fileBody(&f)})
	resp.header = http.Header{"X-Goog-Upload-Status": {"final"}}
	return resp
}

func (s *Server) startUpload(r *http.Request, body []byte) response {
	var in struct {
		File struct {
			Name        string `json:"name"`
			DisplayName string `json:"displayName"`
			MIMEType    string `json:"mimeType"`
		} `json:"file"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return badRequest("Invalid JSON payload received: " + err.Error())
		}
	}
	s.fileSeq++
	name := in.File.Name
	if name == "" {
		name = fmt.Sprintf("files/file-%06d", s.fileSeq)
	}
	mime := in.File.MIMEType
	if mime == "" {
		mime = r.Header.Get("X-Goog-Upload-Header-Content-Type")
	}
	id := fmt.Sprintf("upload-%06d", s.fileSeq)
	s.uploads[id] = &upload{file: storedFile{name: name, displayName: in.File.DisplayName, mimeType: mime, created: s.now()}}
	resp := jsonResponse(http.StatusOK, struct{}{})
	resp.header = http.Header{
		"X-Goog-Upload-Url":    {"http://" + r.Host + uploadPath + "?upload_id=" + id + "&upload_protocol=resumable"},
		"X-Goog-Upload-Status": {"active"},
	}
	return resp
}

type fileJSON struct {
	Name        string `json:"name"`
	DisplayName string `json:"displayName,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
	SizeBytes   string `json:"sizeBytes"`
	CreateTime  string `json:"createTime,omitempty"`
	UpdateTime  string `json:"updateTime,omitempty"`
	URI         string `json:"uri"`
	State       string `json:"state"`
	Source      string `json:"source"`
}

// fileBody is a File resource; its uri is the live form
// (https://generativelanguage.googleapis.com/v1beta/files/ID).
func fileBody(f *storedFile) fileJSON {
	return fileJSON{
		Name: f.name, DisplayName: f.displayName, MIMEType: f.mimeType,
		SizeBytes: strconv.Itoa(len(f.data)), CreateTime: rfc3339(f.created), UpdateTime: rfc3339(f.created),
		URI: "https://generativelanguage.googleapis.com/v1beta/" + f.name, State: "ACTIVE", Source: "UPLOADED",
	}
}

// getFile answers GET /v1beta/files/{id} (the SDK's Files.Get).
func (s *Server) getFile(id string) response {
	f, ok := s.files[id]
	if !ok {
		return notFound()
	}
	return jsonResponse(http.StatusOK, fileBody(f))
}
